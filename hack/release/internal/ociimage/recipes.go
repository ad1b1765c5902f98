// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

// The telesched images. Agent, Scheduler and Descheduler are
// Dockerfile.agent's, Dockerfile.scheduler's and Dockerfile.descheduler's
// final stages (TestRecipesMatchDockerfiles holds them equal, and every
// Dockerfile.* to a recipe here); Pause and Workload are the node test's pod sandbox and
// pod images (test/node/images).

// Agent is Dockerfile.agent: the cgo-linked agent on distroless/base.
var Agent = Recipe{
	Name:       "telesched-agent",
	Base:       BaseNonroot,
	Copies:     []Copy{{Package: "./cmd/telesched-agent", Dest: "/telesched-agent", CGO: true}},
	User:       "48811:48811",
	Entrypoint: []string{"/telesched-agent"},
	Expose:     []string{"9102"},
}

// Scheduler is Dockerfile.scheduler: the static scheduler on
// distroless/static.
var Scheduler = Recipe{
	Name:       "telesched-scheduler",
	Base:       StaticNonroot,
	Copies:     []Copy{{Package: "./cmd/telesched-scheduler", Dest: "/telesched-scheduler"}},
	User:       "48812:48812",
	Entrypoint: []string{"/telesched-scheduler"},
	Expose:     []string{"10259"},
}

// Descheduler is Dockerfile.descheduler: the static descheduler on
// distroless/static, as a user of its own.
var Descheduler = Recipe{
	Name:       "telesched-descheduler",
	Base:       StaticNonroot,
	Copies:     []Copy{{Package: "./cmd/telesched-descheduler", Dest: "/telesched-descheduler"}},
	User:       "48813:48813",
	Entrypoint: []string{"/telesched-descheduler"},
	Expose:     []string{"10262"},
}

// Pause is the pod sandbox image: a static program that holds the pod's
// namespaces, reaps orphans and exits 0 on SIGINT or SIGTERM. 65535 is
// the user upstream's pause image runs as.
var Pause = Recipe{
	Name:       "telesched-pause",
	Base:       StaticNonroot,
	Copies:     []Copy{{Package: "./test/node/images/pause", Dest: "/pause"}},
	User:       "65535:65535",
	Entrypoint: []string{"/pause"},
}

// Workload is the node test's pod: it prints a line and waits for SIGTERM,
// as distroless's nonroot user.
var Workload = Recipe{
	Name:       "telesched-workload",
	Base:       StaticNonroot,
	Copies:     []Copy{{Package: "./test/node/images/workload", Dest: "/workload"}},
	User:       "65532:65532",
	Entrypoint: []string{"/workload"},
}

// All is every image hack/images builds, in that order.
var All = []Recipe{Agent, Scheduler, Descheduler, Pause, Workload}
