// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so the
// local control plane (tests and the sandbox) needs no downloaded binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
