// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostfs reads host files (procfs, sysfs) under an injectable root,
// so the agent reads a real host's /proc and /sys, a real-machine snapshot
// or a simulated node's tree through the same code.
package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Root is a directory that stands for the host's "/". The zero value reads
// the real host.
type Root struct {
	dir    string
	faults map[string]error // host path -> error its reads return
	// changing are faults a test sets and clears while the root reads;
	// nil for none.
	changing *Faults
	// beforeRead, when set, is called with each host path before it is
	// read.
	beforeRead func(hostPath string)
	// dirs, when set, keeps the directories ReadInto reads from open (see
	// WithDirCache); nil opens every file by its full path.
	dirs *dirCache
}

// New returns a Root for dir ("" or "/" for the real host).
func New(dir string) Root {
	if dir == "" {
		dir = "/"
	}
	return Root{dir: filepath.Clean(dir)}
}

// Dir returns the directory the root stands for.
func (r Root) Dir() string {
	if r.dir == "" {
		return "/"
	}
	return r.dir
}

// Path maps an absolute host path ("/proc/stat") under the root.
func (r Root) Path(hostPath string) string {
	// A clean absolute path under a clean root is the two joined, in one
	// allocation; filepath.Join would clean it again in three.
	if isCleanAbs(hostPath) {
		if dir := r.Dir(); dir != "/" {
			return dir + hostPath
		}
		return hostPath
	}
	return filepath.Join(r.Dir(), hostPath)
}

// isCleanAbs reports whether p is an absolute path other than "/" that
// filepath.Clean leaves as it is: no empty, "." or ".." component, no
// trailing slash. Cleaning a clean path allocates nothing.
func isCleanAbs(p string) bool {
	return len(p) > 1 && p[0] == '/' && filepath.Clean(p) == p
}

// WithFaults returns a copy of r whose reads of the given host paths fail
// with the given errors, wrapped as *fs.PathError like real ones. It stands
// in for what files under a test tree cannot do when the tests run as root:
// EACCES on RAPL energy_uj, EIO from a broken thermal zone.
func (r Root) WithFaults(faults map[string]error) Root {
	merged := make(map[string]error, len(r.faults)+len(faults))
	for p, err := range r.faults {
		merged[p] = err
	}
	for p, err := range faults {
		merged[filepath.Clean(p)] = err
	}
	r.faults = merged
	return r
}

// Faults are injected read errors, by host path, that a test may set and
// clear while a root reads through them (see WithFaultSet): a sensor that
// reads well and then fails, as a dying one does. The zero value fails
// nothing. It is safe for concurrent use.
type Faults struct {
	mu sync.Mutex
	m  map[string]error
}

// Set makes reads of hostPath fail with err from now on; a nil err makes
// them succeed again.
func (f *Faults) Set(hostPath string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]error{}
	}
	if err == nil {
		delete(f.m, filepath.Clean(hostPath))
		return
	}
	f.m[filepath.Clean(hostPath)] = err
}

func (f *Faults) get(hostPath string) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, ok := f.m[hostPath]
	return err, ok
}

// WithFaultSet returns a copy of r whose reads also fail as f says at the
// time of each read, wrapped as *fs.PathError like real ones (see
// WithFaults).
func (r Root) WithFaultSet(f *Faults) Root {
	r.changing = f
	return r
}

// WithReadHook returns a copy of r that calls f with each host path
// before it reads the file: a program that stands a simulated host behind
// the root (the sandbox) brings the host's counters up to date in it, as
// a real host's are at every read.
func (r Root) WithReadHook(f func(hostPath string)) Root {
	r.beforeRead = f
	return r
}

// fault runs the read hook for a read of hostPath and returns the error
// injected for it, if any.
func (r Root) fault(hostPath string) (error, bool) {
	if r.beforeRead != nil {
		r.beforeRead(hostPath)
	}
	clean := filepath.Clean(hostPath)
	err, ok := r.faults[clean]
	if !ok && r.changing != nil {
		err, ok = r.changing.get(clean)
	}
	return err, ok
}

// ReadFile reads a host file.
func (r Root) ReadFile(hostPath string) ([]byte, error) {
	if err, ok := r.fault(hostPath); ok {
		return nil, &fs.PathError{Op: "open", Path: r.Path(hostPath), Err: err}
	}
	return os.ReadFile(r.Path(hostPath))
}

// ReadInto reads a host file into buf and returns the part of buf it
// filled; a file that does not fit is read whole into a new slice, as
// ReadFile does. It is for the small files read every sample (sysfs
// attributes, which hold at most a page, Documentation/filesystems/sysfs.rst,
// and procfs files): open, read to the end and close, without the
// os.File, the poller registration and the stat that os.ReadFile adds, and
// without allocating the contents. The calls are raw system calls (see
// raw.go): they leave the runtime's monitor thread asleep. A root with a
// directory cache (WithDirCache) opens the file relative to its kept
// directory.
func (r Root) ReadInto(hostPath string, buf []byte) ([]byte, error) {
	if err, ok := r.fault(hostPath); ok {
		return nil, &fs.PathError{Op: "open", Path: r.Path(hostPath), Err: err}
	}
	fd, err := r.open(hostPath)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: r.Path(hostPath), Err: err}
	}
	defer rawClose(fd)
	n := 0
	for n < len(buf) {
		m, err := rawRead(fd, buf[n:])
		switch {
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: r.Path(hostPath), Err: err}
		case m == 0:
			return buf[:n], nil
		}
		n += m
	}
	// buf is full: the file may be longer.
	return os.ReadFile(r.Path(hostPath))
}

// ReadString reads a host file and trims surrounding white space.
func (r Root) ReadString(hostPath string) (string, error) {
	b, err := r.ReadFile(hostPath)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(b)), nil
}

// ReadInt reads a host file holding one decimal integer, such as a sysfs
// attribute.
func (r Root) ReadInt(hostPath string) (int64, error) {
	var buf [64]byte
	b, err := r.ReadInto(hostPath, buf[:])
	if err != nil {
		return 0, err
	}
	v, err := ParseInt(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", hostPath, err)
	}
	return v, nil
}

// ReadUint reads a host file holding one unsigned decimal integer.
func (r Root) ReadUint(hostPath string) (uint64, error) {
	var buf [64]byte
	b, err := r.ReadInto(hostPath, buf[:])
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", hostPath, err)
	}
	return v, nil
}

// Glob returns the host paths (not root-prefixed) matching a pattern of host
// paths, sorted.
func (r Root) Glob(hostPattern string) ([]string, error) {
	matches, err := filepath.Glob(r.Path(hostPattern))
	if err != nil {
		return nil, err
	}
	prefix := r.Dir()
	for i, m := range matches {
		rel, err := filepath.Rel(prefix, m)
		if err != nil {
			return nil, err
		}
		matches[i] = "/" + filepath.ToSlash(rel)
	}
	return matches, nil
}

// Exists reports whether a host path exists. Like ReadInto, it makes a raw
// system call: the pod-resources collector asks every sample.
func (r Root) Exists(hostPath string) bool {
	return rawExists(r.Path(hostPath))
}

// Lookup resolves a host path as stat(2) does, following symbolic links,
// and returns nil or why it does not resolve, as an *fs.PathError
// (fs.ErrNotExist, fs.ErrPermission). Like Exists, it makes a raw system
// call.
func (r Root) Lookup(hostPath string) error {
	name := r.Path(hostPath)
	if err := rawLookup(name); err != nil {
		return &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return nil
}

// ParseInt parses one decimal integer surrounded by optional white space.
func ParseInt(b []byte) (int64, error) {
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// IsAbsent reports whether err means the file does not exist.
func IsAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist)
}

// IsPermission reports whether err means the file may not be read, as for
// RAPL energy_uj, root-only since CVE-2020-8694.
func IsPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// IsNotSupported reports whether err means the kernel does not support the
// file, as reading /proc/pressure/* with PSI disabled (EOPNOTSUPP).
func IsNotSupported(err error) bool {
	return errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENODATA)
}

// Readlink reads a host symbolic link, as readlink(2) does: the target as
// the link holds it, relative links unresolved.
func (r Root) Readlink(hostPath string) (string, error) {
	if err, ok := r.fault(hostPath); ok {
		return "", &fs.PathError{Op: "readlink", Path: r.Path(hostPath), Err: err}
	}
	return os.Readlink(r.Path(hostPath))
}
