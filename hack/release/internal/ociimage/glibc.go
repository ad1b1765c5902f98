// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Triplets are Debian's multiarch directory names (/lib/<triplet>) by
// GOARCH.
var Triplets = map[string]string{
	"amd64": "x86_64-linux-gnu",
	"arm64": "aarch64-linux-gnu",
}

// GlibcEntries is this host's C library as distroless/base-debian12 has it
// (base/base.bzl: the libc6 package on the static base): every shared
// object and link that Debian's libc6:<arch> package installs under /lib
// and /lib64, at the package's paths (the dynamic loader
// /lib64/ld-linux-x86-64.so.2 is a link to /lib/<triplet>/), and the
// package's /etc/ld.so.conf.d file with the /etc/ld.so.conf that includes
// it. Without an /etc/ld.so.cache the loader searches its built-in
// directories, /lib/<triplet> and /usr/lib/<triplet> among them (`ld.so
// --help`, "Shared library search path"); there the NVIDIA container
// runtime mounts libnvidia-ml.so.1. Left out: the gconv modules (iconv),
// which the binaries do not use.
//
// root is where the host's tree is ("/", a test's fixture); the package's
// file list is root/var/lib/dpkg/info/libc6:<arch>.list.
func GlibcEntries(root, goarch string) ([]Entry, error) {
	triplet, ok := Triplets[goarch]
	if !ok {
		return nil, fmt.Errorf("glibc for GOARCH %q: no Debian multiarch triplet known", goarch)
	}
	if root == "" {
		root = "/"
	}
	list := path.Join(root, "var/lib/dpkg/info", "libc6:"+goarch+".list")
	f, err := os.Open(list)
	if err != nil {
		return nil, fmt.Errorf("glibc for GOARCH %s: %w (needs Debian's libc6:%s installed: dpkg --add-architecture %s; apt-get install libc6:%s)", goarch, err, goarch, goarch, goarch)
	}
	defer f.Close()
	var entries []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := sc.Text()
		keep := strings.HasPrefix(p, "/lib/"+triplet+"/") || strings.HasPrefix(p, "/lib64/") ||
			strings.HasPrefix(p, "/etc/ld.so.conf.d/")
		if !keep {
			continue
		}
		src := path.Join(root, p)
		fi, err := os.Lstat(src)
		if err != nil {
			return nil, fmt.Errorf("glibc: %s is in %s but: %w", p, list, err)
		}
		switch {
		case fi.IsDir():
			continue // Layer adds parents.
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return nil, err
			}
			entries = append(entries, Symlink(p, target))
		default:
			entries = append(entries, HostFile(p, fi.Mode().Perm(), src))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("glibc: reading %s: %w", list, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("glibc: %s lists no libraries under /lib/%s", list, triplet)
	}
	entries = append(entries, File("/etc/ld.so.conf", 0o644, []byte("include /etc/ld.so.conf.d/*.conf\n")))
	return entries, nil
}

// Linkage is what a binary needs from the image to start: its program
// interpreter (the dynamic loader; empty for a static binary) and the
// shared libraries it names (DT_NEEDED).
type Linkage struct {
	Interp string
	Needed []string
}

// ReadLinkage reads the binary's ELF headers.
func ReadLinkage(bin string) (Linkage, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return Linkage{}, err
	}
	defer f.Close()
	var l Linkage
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return Linkage{}, fmt.Errorf("%s: reading PT_INTERP: %w", bin, err)
			}
			l.Interp = strings.TrimRight(string(b), "\x00")
		}
	}
	l.Needed, err = f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return Linkage{}, fmt.Errorf("%s: %w", bin, err)
	}
	sort.Strings(l.Needed)
	return l, nil
}

// checkLinkage says whether the files of an image hold what the binary
// needs: its loader at its path and each library in a directory the
// loader searches.
func checkLinkage(bin, dest string, l Linkage, files map[string]bool, triplet string) error {
	if l.Interp == "" && len(l.Needed) == 0 {
		return nil
	}
	if l.Interp != "" && !files[l.Interp] {
		return fmt.Errorf("%s (%s) is dynamically linked (interpreter %s) and the base has no such file: build it with CGO_ENABLED=0 or use a base with glibc", dest, bin, l.Interp)
	}
	for _, lib := range l.Needed {
		found := false
		for _, dir := range []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"} {
			if files[path.Join(dir, lib)] {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s (%s) needs %s, which the base does not have", dest, bin, lib)
		}
	}
	return nil
}
