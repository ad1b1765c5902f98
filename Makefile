# telesched Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO      ?= go
BIN     := $(abspath bin)
TOOLS   := hack/tools

# Control-plane binaries, built from the Go module proxy (no downloads of
# prebuilt binaries). They depend on go.mod/go.sum only, so they are rebuilt
# when the pinned versions change and not on every run.
CONTROL_PLANE := $(BIN)/etcd $(BIN)/kube-apiserver
CONTROLLER_GEN := $(BIN)/controller-gen
# staticcheck, pinned in the tools module, is part of make verify.
STATICCHECK := $(BIN)/staticcheck
# kustomize, pinned in the tools module: the integration tests render
# deploy/ through a namespace overlay with it, as users install.
KUSTOMIZE := $(BIN)/kustomize
# promtool, from its own tools module, checks and unit-tests the alert rules.
PROMTOOL     := $(BIN)/promtool
PROMTOOL_MOD := hack/promtool
# helm, from its own tools module: make test lints and renders the chart in
# deploy/helm/telesched and checks it against the kustomize tree.
HELM     := $(BIN)/helm
HELM_MOD := hack/helm
# node_exporter, built from the Go module proxy, for the agent benchmark.
NODE_EXPORTER_VERSION := v1.12.1
NODE_EXPORTER := $(BIN)/node_exporter

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/telesched/telesched/internal/version.Version=$(VERSION)

# Product binaries: every directory under cmd/.
COMMANDS := $(notdir $(wildcard cmd/*))

# go-nvml's cgo preamble names NVML functions NVIDIA has deprecated; the
# warnings say nothing about telesched and bury real output.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# Integration tests find the control plane here.
export TELESCHED_BIN_DIR := $(BIN)

# Arguments for go test (e.g. make test GOTESTFLAGS='-run CRD -v').
GOTESTFLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9\/.-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: $(CONTROL_PLANE) ## Build every binary (telesched commands and the control plane) into bin/.
	@if [ -n "$(COMMANDS)" ]; then \
		echo "go build $(addprefix ./cmd/,$(COMMANDS)) -> bin/"; \
		$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(addprefix ./cmd/,$(COMMANDS)); \
	fi

# arm64 (NVIDIA Grace, AWS Graviton, Ampere): the telesched commands built
# for linux/arm64 into bin/linux-arm64/. The agent links go-nvml with cgo,
# so it needs a C cross-compiler: aarch64-linux-gnu-gcc (Debian's
# gcc-aarch64-linux-gnu). The images build for both with `make images
# PLATFORMS=linux/amd64,linux/arm64`.
ARM64_CC ?= aarch64-linux-gnu-gcc

.PHONY: build-arm64
build-arm64: ## Cross-build the telesched commands for linux/arm64 into bin/linux-arm64/ (needs aarch64-linux-gnu-gcc for the agent's cgo).
	@command -v $(ARM64_CC) >/dev/null || { echo "make build-arm64: $(ARM64_CC) not found (Debian: apt-get install gcc-aarch64-linux-gnu; or set ARM64_CC)" >&2; exit 1; }
	GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$(ARM64_CC) $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/linux-arm64/ $(addprefix ./cmd/,$(COMMANDS))

.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build etcd and kube-apiserver from source into bin/ (first build takes minutes).

$(BIN)/etcd: hack/etcd/go.mod hack/etcd/go.sum hack/etcd/main.go
	@echo "building bin/etcd from go.etcd.io/etcd/server/v3 (first build takes a minute)"
	$(GO) build -C hack/etcd -o $@ .

# Kubernetes' own release stamping for a build of version $(1) (v1.37.2),
# so the binary reports it (/version, kubectl version, and the chart's
# kubeVersion, which Helm checks against it) rather than v0.0.0-master.
k8s_ldflags = -X k8s.io/component-base/version.gitVersion=$(1) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(patsubst v%,%,$(1)))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(1))) \
	-X k8s.io/component-base/version.gitTreeState=clean

$(BIN)/kube-apiserver: go.mod go.sum
	@echo "building bin/kube-apiserver from k8s.io/kubernetes (first build takes several minutes)"
	$(GO) build -ldflags "$(call k8s_ldflags,$(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes))" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(NODE_EXPORTER):
	@echo "building bin/node_exporter $(NODE_EXPORTER_VERSION) from the Go module proxy"
	GOBIN=$(BIN) $(GO) install github.com/prometheus/node_exporter@$(NODE_EXPORTER_VERSION)

$(PROMTOOL): $(PROMTOOL_MOD)/go.mod $(PROMTOOL_MOD)/go.sum
	@echo "building bin/promtool from github.com/prometheus/prometheus (first build takes minutes)"
	$(GO) build -C $(PROMTOOL_MOD) -o $@ github.com/prometheus/prometheus/cmd/promtool

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool (alert rule checks and unit tests) from source into bin/.

$(HELM): $(HELM_MOD)/go.mod $(HELM_MOD)/go.sum
	@echo "building bin/helm from helm.sh/helm/v3 (first build takes minutes)"
	$(GO) build -C $(HELM_MOD) -o $@ helm.sh/helm/v3/cmd/helm

.PHONY: helm
helm: $(HELM) ## Build helm (the chart's lint and render checks) from source into bin/.

$(CONTROLLER_GEN): $(TOOLS)/go.mod $(TOOLS)/go.sum
	$(GO) build -C $(TOOLS) -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# Kubernetes' code generators for the typed client (hack/update-client.sh).
CLIENT_GENS := $(BIN)/client-gen $(BIN)/lister-gen $(BIN)/informer-gen $(BIN)/applyconfiguration-gen

$(CLIENT_GENS): $(TOOLS)/go.mod $(TOOLS)/go.sum
	$(GO) build -C $(TOOLS) -o $@ k8s.io/code-generator/cmd/$(notdir $@)

$(STATICCHECK): $(TOOLS)/go.mod $(TOOLS)/go.sum
	$(GO) build -C $(TOOLS) -o $@ honnef.co/go/tools/cmd/staticcheck

$(KUSTOMIZE): $(TOOLS)/go.mod $(TOOLS)/go.sum
	$(GO) build -C $(TOOLS) -o $@ sigs.k8s.io/kustomize/kustomize/v5

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) $(CLIENT_GENS) ## Generate deepcopy code and the typed client (clientset, listers, informers, apply configurations) for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	BIN=$(BIN) hack/update-client.sh

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD YAML into deploy/crds/.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=deploy/crds

##@ Verify

.PHONY: verify
verify: verify-fmt verify-vet verify-staticcheck verify-generated verify-mod verify-licence ## Run every check: gofmt, go vet, staticcheck, generated files, go.mod tidiness, licence headers.

.PHONY: verify-licence
verify-licence: ## Fail if LICENSE is missing or a Go file lacks the SPDX header (Apache-2.0) in its first lines.
	@test -f LICENSE || { echo "LICENSE is missing"; exit 1; }
	@out=$$(for f in $$(git ls-files '*.go'); do head -5 "$$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$$f"; done); \
	if [ -n "$$out" ]; then echo "no SPDX-License-Identifier: Apache-2.0 header in:"; echo "$$out"; exit 1; fi

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-formatted.
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## Run go vet (and on test/bench/schedperf's benchmark, behind its build tag).
	$(GO) vet ./...
	$(GO) vet -tags schedperf ./test/bench/schedperf/...
	$(GO) vet -tags node ./test/node/...
	$(GO) vet -C $(RELEASE_MOD) ./...
	$(GO) vet -C hack/etcd ./...

.PHONY: verify-staticcheck
verify-staticcheck: $(STATICCHECK) ## Run staticcheck (pinned in hack/tools) on every package.
	$(STATICCHECK) ./...
	cd $(RELEASE_MOD) && $(STATICCHECK) ./...

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) $(CLIENT_GENS) ## Fail if generated code (deepcopy, the typed client) or CRD YAML is stale.
	hack/verify-generated.sh

.PHONY: verify-mod
verify-mod: ## Fail if go.mod/go.sum (root or the tools modules) are not tidy.
	$(GO) mod tidy -diff
	cd $(TOOLS) && $(GO) mod tidy -diff
	cd $(RELEASE_MOD) && $(GO) mod tidy -diff
	cd hack/etcd && $(GO) mod tidy -diff
	cd $(PROMTOOL_MOD) && $(GO) mod tidy -diff
	cd $(HELM_MOD) && $(GO) mod tidy -diff
	cd $(KUBENODE_MOD) && $(GO) mod tidy -diff
	cd $(CONTAINERD_MOD) && $(GO) mod tidy -diff
	for d in hack/compat/v*/; do (cd $$d && $(GO) mod tidy -diff) || exit 1; done

##@ Test

# Packages whose code runs concurrently (the scheduler's telemetry cache,
# reservation book and power domains with their informers, the plugins that
# read them from parallel Filter/Score goroutines, the agent's publisher and
# its health check): make test runs their unit tests again under the race
# detector.
RACE_PKGS ?= ./scheduler/telemetry/... ./scheduler/estimate/... ./scheduler/powerbudget/... ./scheduler/plugins/... ./agent/publisher/... ./agent/app/... ./internal/cowmap/...

.PHONY: test
test: build $(PROMTOOL) $(KUSTOMIZE) $(HELM) ## Run unit, integration and end-to-end tests (a real etcd + kube-apiserver, bin/telesched-scheduler, the sandbox scenario, promtool on the alert rules, helm lint and template of the chart), then the concurrent packages' unit tests under the race detector.
	$(GO) test -count=1 $(GOTESTFLAGS) ./...
	$(GO) test -C $(RELEASE_MOD) -count=1 $(GOTESTFLAGS) ./...
	$(MAKE) test-race

# Kubernetes versions besides go.mod's that the README's compatibility
# matrix lists as tested: each hack/compat/<version>/ module builds that
# kube-apiserver from the Go module proxy into bin/compat/<version>/,
# beside links to the rest of bin/, and test-compat runs the deploy suite
# and the integration tests hack/compat/<version>/integration-tests names
# (all of them where it names none) against it. Kept out of make test: each API server is a
# build of several minutes.
COMPAT_VERSIONS ?= $(notdir $(wildcard hack/compat/v*))

$(BIN)/compat/%/kube-apiserver: hack/compat/%/go.mod hack/compat/%/go.sum
	@echo "building bin/compat/$*/kube-apiserver from hack/compat/$* (several minutes)"
	$(GO) build -C hack/compat/$* -ldflags "$(call k8s_ldflags,$(shell $(GO) list -C hack/compat/$* -m -f '{{.Version}}' k8s.io/kubernetes))" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

.PHONY: test-compat
test-compat: build $(KUSTOMIZE) $(HELM) $(PROMTOOL) $(addprefix $(BIN)/compat/,$(addsuffix /kube-apiserver,$(COMPAT_VERSIONS))) ## Run the integration and deploy tests against each API server of COMPAT_VERSIONS (hack/compat/*), built from source.
	@for v in $(COMPAT_VERSIONS); do \
		dir=$(BIN)/compat/$$v; \
		for f in etcd helm kustomize promtool $(COMMANDS); do ln -sf $(BIN)/$$f $$dir/$$f; done; \
		echo "--- kube-apiserver of k8s.io/kubernetes $$(cd hack/compat/$$v && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) (hack/compat/$$v)"; \
		run=$$(grep -v '^\#' hack/compat/$$v/integration-tests 2>/dev/null | paste -sd'|'); \
		TELESCHED_BIN_DIR=$$dir $(GO) test -count=1 $(GOTESTFLAGS) ./test/deploy/ || exit 1; \
		TELESCHED_BIN_DIR=$$dir $(GO) test -count=1 $(GOTESTFLAGS) -run "$$run" ./test/integration/ || exit 1; \
	done

.PHONY: test-race
test-race: ## Run the unit tests of the packages with concurrency (RACE_PKGS) under the race detector.
	$(GO) test -race -short -count=1 $(GOTESTFLAGS) $(RACE_PKGS)

.PHONY: test-unit
test-unit: $(PROMTOOL) $(HELM) ## Run unit tests only (no control plane).
	$(GO) test -short $(GOTESTFLAGS) ./...
	$(GO) test -C $(RELEASE_MOD) -short $(GOTESTFLAGS) ./...

##@ Real node

# A one-node cluster on this machine from real parts (test/node/cluster):
# the control plane above, kube-controller-manager, kube-scheduler, the
# kubelet, kube-proxy and kubectl from the same k8s.io/kubernetes release
# (hack/kubenode), containerd 2.x and its runc shim (hack/containerd),
# with Debian's runc and CNI plugins. Needs root; cluster.Preflight names
# whatever else the host lacks.
KUBENODE_MOD := hack/kubenode
CONTAINERD_MOD := hack/containerd
KUBENODE_BINARIES := $(addprefix $(BIN)/,kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
CONTAINERD_BINARIES := $(addprefix $(BIN)/,containerd containerd-shim-runc-v2 ctr)
NODE_DIR ?= _output/node
NODE_PACKAGES := runc containernetworking-plugins iptables

# The release's version, as Kubernetes' own build stamps it, so the node
# reports kubeletVersion v1.37.x rather than v0.0.0-master.
KUBENODE_VERSION = $(shell $(GO) list -C $(KUBENODE_MOD) -m -f '{{.Version}}' k8s.io/kubernetes)
KUBENODE_LDFLAGS = $(call k8s_ldflags,$(KUBENODE_VERSION))

$(KUBENODE_BINARIES): $(BIN)/%: $(KUBENODE_MOD)/go.mod $(KUBENODE_MOD)/go.sum
	@echo "building bin/$* from k8s.io/kubernetes (first build takes minutes)"
	$(GO) build -C $(KUBENODE_MOD) -ldflags "$(KUBENODE_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$*

$(CONTAINERD_BINARIES): $(BIN)/%: $(CONTAINERD_MOD)/go.mod $(CONTAINERD_MOD)/go.sum
	@echo "building bin/$* from github.com/containerd/containerd/v2 (first build takes minutes)"
	$(GO) build -C $(CONTAINERD_MOD) -o $@ github.com/containerd/containerd/v2/cmd/$*

.PHONY: node-binaries
node-binaries: $(CONTROL_PLANE) $(KUBENODE_BINARIES) $(CONTAINERD_BINARIES) ## Build the real node's binaries (kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl, containerd, its runc shim, ctr) into bin/.

.PHONY: node-packages
node-packages: ## Install the Debian packages the real node needs (runc, CNI plugins, iptables) where missing; needs root.
	@missing=$$(for p in $(NODE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt-get install $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

.PHONY: node-up
node-up: build node-binaries images-local ## Start the one-node cluster (root), import the images, run until Ctrl-C, then tear it down (NODE_DIR).
	$(GO) run ./hack/node up -dir $(NODE_DIR) -bin-dir $(BIN) -images $(IMAGES_DIR)

.PHONY: node-down
node-down: ## Remove what a node-up that did not stop cleanly left behind (processes, containers, mounts, network, NODE_DIR).
	$(GO) run ./hack/node down -dir $(NODE_DIR) -bin-dir $(BIN)

.PHONY: test-node
test-node: build node-binaries $(HELM) images-local ## Run the real-node test (root): the chart installed, upgraded from 0.1.0 and removed on a one-node cluster.
	TELESCHED_BIN_DIR=$(BIN) TELESCHED_IMAGES_DIR=$(abspath $(IMAGES_DIR)) \
		$(GO) test -tags node -count=1 -timeout 30m -v ./test/node/

##@ Bench

.PHONY: bench
bench: bench-go bench-agent bench-scheduler bench-fleet bench-writes ## Run every benchmark.

.PHONY: bench-go
bench-go: ## Run Go benchmarks with memory statistics.
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: bench-agent
bench-agent: build $(NODE_EXPORTER) ## Agent vs node_exporter: CPU per cycle, RSS, object size, API writes per minute (about 6 minutes; BENCHFLAGS=-baseline-agent=BIN runs another agent build beside it).
	$(GO) run ./test/bench/agent -agent $(BIN)/telesched-agent -node-exporter $(NODE_EXPORTER) $(BENCHFLAGS)

.PHONY: bench-scheduler
bench-scheduler: build ## Scheduling throughput and CPU per pod, default vs telesched profile, with telemetry flowing and a backlog, the scheduler run with the Deployment's feature gates, none (NODES=1000 PODS=1000 ROUNDS=5; BENCHFLAGS=-feature-gates=SchedulerPreQueueingHints=true to run with a gate, -flush-in-run to contain the 5-minute flush in every run, -mode=quiet for the old, kind regime).
	$(GO) run ./test/bench/scheduler -scheduler $(BIN)/telesched-scheduler -nodes $(or $(NODES),1000) -pods $(or $(PODS),1000) -rounds $(or $(ROUNDS),5) $(BENCHFLAGS)

.PHONY: bench-writes
bench-writes: build ## kube-apiserver and etcd CPU per NodeTelemetry status write: server-side apply of the whole status, of the changed fields only, JSON merge patch (NODES=200 ROUNDS=5 WRITES=2000).
	$(GO) run ./test/bench/writes -nodes $(or $(NODES),200) -rounds $(or $(ROUNDS),5) -writes $(or $(WRITES),2000) $(BENCHFLAGS)

.PHONY: bench-fleet
bench-fleet: build ## Many real agents in one process against one API server: writes/s, API server and etcd CPU, etcd size, informer lag (AGENTS=500 DURATION=10m).
	$(GO) run ./test/bench/fleet -agents $(or $(AGENTS),500) -duration $(or $(DURATION),10m) $(BENCHFLAGS)

# Kubernetes' own scheduler benchmark (test/integration/scheduler_perf of
# the k8s.io/kubernetes go.mod pins) on upstream's workload files, with the
# default profile and with telesched's (test/bench/schedperf, build tag
# schedperf). TOPICS: upstream's topic directories and/or telesched (our
# workloads); WORKLOADS: <test case>/<workload>, each part a regular
# expression anchored at both ends; LABELS: scheduler_perf's label filter
# (empty: every workload WORKLOADS names); PROFILES: default,telesched;
# ROUNDS: the profiles' order alternates by round. etcd is bin/etcd.
# scheduler_perf starts kube-apiserver in the test process; only etcd
# comes from bin/.
TOPICS    ?= misc
WORKLOADS ?= SchedulingBasic/500Nodes
PROFILES  ?= default,telesched
LABELS    ?=
SCHEDPERF_OUT ?= $(BIN)/schedperf/$(shell date -u +%Y%m%dT%H%M%SZ)

.PHONY: bench-scheduler-perf
bench-scheduler-perf: $(BIN)/etcd ## scheduler_perf's workloads, default vs telesched profile: throughput, ratio, p99 attempt latency (TOPICS=misc WORKLOADS=SchedulingBasic/500Nodes LABELS= PROFILES=default,telesched ROUNDS=1; data items in SCHEDPERF_OUT).
	@out=$(SCHEDPERF_OUT); profiles='$(PROFILES)'; \
	bench="BenchmarkPerfScheduling/.*/.*/$$(echo '$(WORKLOADS)' | sed 's#[^/][^/]*#^(&)$$#g')"; \
	for r in $$(seq 1 $(or $(ROUNDS),1)); do \
		order=$$profiles; [ $$((r % 2)) = 1 ] || order=$$(echo $$profiles | tr , '\n' | tac | paste -sd,); \
		mkdir -p $$out/r$$r/logs; \
		echo "--- round $$r ($$order): $$out/r$$r"; \
		start=$$SECONDS; \
		PATH=$(BIN):$$PATH ARTIFACTS=$$out/r$$r/logs KUBE_CACHE_MUTATION_DETECTOR=false \
			$(GO) test -tags schedperf -run '^$$' -bench "$$bench" -benchtime=1x -timeout 6h ./test/bench/schedperf \
			-args -data-items-dir=$$out/r$$r -schedperf-topics='$(TOPICS)' -schedperf-profiles=$$order \
			-perf-scheduling-label-filter='$(LABELS)' $(BENCHFLAGS) > $$out/r$$r/bench.log 2>&1 \
			|| { tail -50 $$out/r$$r/bench.log; exit 1; }; \
		grep '^schedperf: ' $$out/r$$r/bench.log || true; \
		echo "round $$r: $$((SECONDS - start))s"; \
	done; \
	$(GO) run ./test/bench/schedperf/compare $$out

##@ Images

# Registry of the images; the tag is VERSION, the one the binaries carry.
IMAGE_REGISTRY ?= ghcr.io/telesched
DOCKER ?= docker

.PHONY: images
images: ## Build the agent, scheduler and descheduler images (needs a running Docker engine; IMAGE_REGISTRY, VERSION; PLATFORMS=linux/amd64,linux/arm64 builds them with buildx and pushes).
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make images: needs a running Docker engine (none is reachable)" >&2; exit 1; }
	@if [ -n "$(PLATFORMS)" ]; then \
		set -x; \
		$(DOCKER) buildx build --platform $(PLATFORMS) --push --sbom=true --provenance=mode=max -f Dockerfile.agent --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-agent:$(VERSION) . && \
		$(DOCKER) buildx build --platform $(PLATFORMS) --push --sbom=true --provenance=mode=max -f Dockerfile.scheduler --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-scheduler:$(VERSION) . && \
		$(DOCKER) buildx build --platform $(PLATFORMS) --push --sbom=true --provenance=mode=max -f Dockerfile.descheduler --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-descheduler:$(VERSION) .; \
	else \
		set -x; \
		$(DOCKER) build -f Dockerfile.agent --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-agent:$(VERSION) . && \
		$(DOCKER) build -f Dockerfile.scheduler --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-scheduler:$(VERSION) . && \
		$(DOCKER) build -f Dockerfile.descheduler --build-arg VERSION=$(VERSION) -t $(IMAGE_REGISTRY)/telesched-descheduler:$(VERSION) .; \
	fi

# Images without Docker (hack/release/images, its internal/ociimage): the same users,
# entrypoints and files as the Dockerfiles, on bases made from this Debian
# host's files, plus the node test's pause and workload images; one
# docker-archive tarball each and images.json (ref, digest, file) in
# IMAGES_DIR. Load one with `ctr -n k8s.io images import FILE`.
IMAGES_DIR ?= _output/images

# Where make release-local's registry listens.
RELEASE_ADDR ?= 127.0.0.1:5000

# hack/release is a Go module of its own (go-containerregistry stays out of
# telesched's): bin/build-images (hack/release/images) and bin/publish
# (hack/release) are built from it and run here, in the checkout.
RELEASE_MOD := hack/release

.PHONY: release-tools
release-tools: ## Build bin/build-images and bin/publish from the hack/release module.
	$(GO) build -C $(RELEASE_MOD) -o $(BIN)/build-images ./images
	$(GO) build -C $(RELEASE_MOD) -o $(BIN)/publish .

.PHONY: release-local
release-local: $(HELM) images-local ## Publish the images and the chart to a registry served on this machine (in memory, RELEASE_ADDR) and serve it until Ctrl-C; prints the helm install that uses it.
	$(BIN)/publish -images $(IMAGES_DIR) -helm $(HELM) -serve $(RELEASE_ADDR)

.PHONY: images-local
images-local: release-tools ## Build the images without Docker or a registry into IMAGES_DIR (default _output/images; IMAGE_REGISTRY, VERSION): docker-archive tarballs for ctr images import.
	$(BIN)/build-images -out $(IMAGES_DIR) -version $(VERSION) -registry $(IMAGE_REGISTRY)

##@ Demo

# Flags for the sandbox (e.g. make demo DEMOFLAGS=--keep).
DEMOFLAGS ?=

.PHONY: demo
demo: demo-banner build ## Run the embedded sandbox: a local cluster, real and simulated nodes, scheduled by telesched (DEMOFLAGS=--keep).
	$(BIN)/telesched-sandbox $(DEMOFLAGS)

.PHONY: soak
soak: demo-banner build ## Run the sandbox's soak: telesched-descheduler evicting, two replicas, through churn and faults (docs/sandbox.md; about 11 minutes).
	$(BIN)/telesched-sandbox --descheduler=skip --soak $(DEMOFLAGS)

.PHONY: demo-banner
demo-banner:
	@echo "make demo: building etcd, kube-apiserver and the telesched binaries into bin/"
	@echo "           (the first build compiles them from source: several minutes on 2 cores; later runs reuse bin/)"

##@ Clean

.PHONY: clean
clean: ## Remove bin/.
	rm -rf $(BIN)
