// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command workload is the node test's pod (hack/release/internal/ociimage's Workload
// image): it prints one line saying who and where it runs, then waits
// for SIGTERM or SIGINT and exits 0, as a well-behaved pod does when the
// kubelet stops it.
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
		fmt.Println("telesched-workload", version.Get())
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	host, _ := os.Hostname()
	fmt.Printf("telesched-workload %s running: uid=%d gid=%d host=%s\n", version.Get(), os.Getuid(), os.Getgid(), host)
	s := <-sigs
	fmt.Printf("telesched-workload: %v, exiting\n", s)
}
