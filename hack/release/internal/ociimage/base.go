// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"fmt"
	"os"
)

// The users and groups of distroless's images (GoogleContainerTools/
// distroless, base/BUILD: passwd_entry and group_entry): root, nobody
// (65534) and nonroot (65532), whose home /home/nonroot is the nonroot
// images' working directory; shell /sbin/nologin, which does not exist.
const (
	NonrootUID = 65532
	NobodyUID  = 65534
)

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
`

// Debian's default /etc/nsswitch.conf (glibc's and Go's resolver read the
// hosts line: files, then DNS), as distroless ships it.
const nsswitch = `passwd:         compat
group:          compat
shadow:         compat
gshadow:        files

hosts:          files dns
networks:       files

protocols:      db files
services:       db files
ethers:         db files
rpc:            db files

netgroup:       nis
`

// Host files the bases take from this Debian 12 machine: Debian's CA
// bundle (package ca-certificates, update-ca-certificates writes it) and
// the release file (base-files).
const (
	HostCACerts   = "/etc/ssl/certs/ca-certificates.crt"
	HostOSRelease = "/etc/os-release"
)

// Base is the file tree and configuration an image starts from.
type Base struct {
	// Name is the image this base stands in for, as the Dockerfiles'
	// final FROM names it.
	Name string
	// Glibc adds this host's C library (GlibcEntries) to the static base.
	Glibc bool
}

// StaticNonroot stands in for gcr.io/distroless/static-debian12:nonroot:
// users, nsswitch.conf, CA certificates, /tmp and /home/nonroot, no libc.
var StaticNonroot = Base{Name: "gcr.io/distroless/static-debian12:nonroot"}

// BaseNonroot stands in for gcr.io/distroless/base-debian12:nonroot: the
// static base and glibc.
var BaseNonroot = Base{Name: "gcr.io/distroless/base-debian12:nonroot", Glibc: true}

// Env, WorkingDir and User of distroless's nonroot images (base/base.bzl:
// PATH, and SSL_CERT_FILE so that OpenSSL finds the bundle; user 65532,
// workdir /home/nonroot). The recipes' USER replaces User.
var baseEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
}

const baseWorkingDir = "/home/nonroot"

// staticEntries is distroless/static's tree (base/BUILD and base/base.bzl:
// passwd, group, tmp.tar with /tmp 01777, nsswitch, os-release, cacerts),
// without tzdata: the telesched binaries load no time zone.
func staticEntries(root string) ([]Entry, error) {
	for _, f := range []string{HostCACerts, HostOSRelease} {
		if _, err := os.Stat(root + f); err != nil {
			return nil, fmt.Errorf("base image: %w (Debian: apt-get install ca-certificates base-files)", err)
		}
	}
	return []Entry{
		File("/etc/passwd", 0o644, []byte(passwd)),
		File("/etc/group", 0o644, []byte(group)),
		File("/etc/nsswitch.conf", 0o644, []byte(nsswitch)),
		HostFile("/etc/ssl/certs/ca-certificates.crt", 0o644, root+HostCACerts),
		HostFile("/etc/os-release", 0o644, root+HostOSRelease),
		Dir("/tmp", 0o777|os.ModeSticky, 0, 0),
		Dir("/home/nonroot", 0o700, NonrootUID, NonrootUID),
		Dir("/root", 0o700, 0, 0),
	}, nil
}
