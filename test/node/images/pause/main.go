// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the pod sandbox's process for the node test's
// containerd (hack/release/internal/ociimage's Pause image): it holds the pod's
// namespaces by sleeping, reaps the zombies of processes re-parented to
// it (it is PID 1 when the pod shares its PID namespace), and exits 0 on
// SIGINT or SIGTERM, as the kubelet expects when it stops a pod.
//
// -v prints its version and exits.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/telesched/telesched/internal/version"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("telesched-pause", version.Get())
		return
	}
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause [-v]")
		os.Exit(2)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not PID 1, so orphans are reaped by another process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
		os.Exit(0)
	}
}

// reap collects every exited child; one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
