// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Opening a file by its full path walks every component of the path in the
// kernel, taking a dentry lookup and a permission check at each:
// /sys/devices/system/cpu/cpu12/thermal_throttle/core_throttle_count is
// seven of them, and the agent opens dozens of such files a second (a
// profile of the agent at its shipped settings had the path walk at a
// third of its system time). A root with a directory cache keeps an O_PATH
// descriptor of each directory it has read a file from and opens the next
// file there relative to it (openat(2)), walking one component. Files are
// still opened, read and closed at every read, so a file that a program
// replaces by renaming another over it (the sandbox's host trees) is read
// as it is now, as the kernel's own files are.

// DefaultDirFDLimit is how many directory descriptors the roots of one
// process keep open at most, together, unless SetDirFDLimit says
// otherwise (the agent's --host-dir-fds). The agent reads from about 90
// directories on a 64-CPU host with its thermal_throttle directories;
// directories beyond the limit are opened by their full path, as before.
const DefaultDirFDLimit = 512

var (
	// dirFDLimit bounds dirFDsOpen; a quarter of the process's open-file
	// limit at most.
	dirFDLimit atomic.Int64
	dirFDsOpen atomic.Int64
)

func init() { SetDirFDLimit(DefaultDirFDLimit) }

// SetDirFDLimit sets how many directory descriptors the roots of this
// process keep open at most, together, capped at a quarter of the
// process's open-file limit (RLIMIT_NOFILE), so that the cache never
// starves the rest of the process of descriptors; 0 keeps none. It
// returns the limit in force. Descriptors already kept stay kept.
func SetDirFDLimit(n int) int64 {
	limit := int64(max(n, 0))
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(1)<<62 {
		limit = min(limit, int64(rl.Cur/4))
	}
	dirFDLimit.Store(limit)
	return limit
}

// dirCache is a root's kept directory descriptors, by the directory's host
// path. It is shared by the copies of a root (WithFaults and the like).
type dirCache struct {
	mu  sync.Mutex
	fds map[string]int
}

// WithDirCache returns a copy of r that keeps open each directory it
// reads a file from with ReadInto (ReadInt, ReadUint), up to the process's
// limit (SetDirFDLimit), and opens files relative to it. For a root read
// over and over, as the agent's is every sample; a program that makes many
// roots (tests, a simulated fleet) leaves them without.
func (r Root) WithDirCache() Root {
	r.dirs = &dirCache{fds: map[string]int{}}
	return r
}

// open opens the host file read-only: relative to its directory's kept
// descriptor where the root keeps one, else by its full path.
func (r Root) open(hostPath string) (int, error) {
	if r.dirs == nil {
		return rawOpen(r.Path(hostPath))
	}
	// A clean absolute path's last component names a file in the
	// directory its others name ("/proc" has none to keep).
	i := strings.LastIndexByte(hostPath, '/')
	if !isCleanAbs(hostPath) || i == 0 {
		return rawOpen(r.Path(hostPath))
	}
	dir, base := hostPath[:i], hostPath[i+1:]
	dfd, ok := r.dirs.get(r, dir)
	if !ok {
		return rawOpen(r.Path(hostPath))
	}
	fd, err := rawOpenAt(dfd, base)
	if err == nil {
		return fd, nil
	}
	// The file is not in the directory kept open. It may be absent, or
	// the directory may have been removed and made again since it was
	// kept (a device unbound and bound, a CPU taken offline and back),
	// leaving the kept descriptor on the removed one: the full path says
	// which.
	fd, ferr := rawOpen(r.Path(hostPath))
	if ferr == nil {
		r.dirs.drop(dir, dfd)
	}
	return fd, ferr
}

// get returns the kept descriptor of the directory at host path dir,
// opening and keeping it if the limit allows.
func (c *dirCache) get(r Root, dir string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[dir]; ok {
		return fd, true
	}
	if dirFDsOpen.Add(1) > dirFDLimit.Load() {
		dirFDsOpen.Add(-1)
		return -1, false
	}
	fd, err := rawOpenDir(r.Path(dir))
	if err != nil {
		dirFDsOpen.Add(-1)
		return -1, false
	}
	c.fds[strings.Clone(dir)] = fd
	return fd, true
}

// drop closes the kept descriptor fd of dir, if it is still the one kept.
func (c *dirCache) drop(dir string, fd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.fds[dir]; ok && kept == fd {
		delete(c.fds, dir)
		rawClose(fd)
		dirFDsOpen.Add(-1)
	}
}

// Close closes the directories r keeps open; r, and the copies sharing
// its cache, read by full paths from then on until they keep them again.
func (r Root) Close() {
	if r.dirs == nil {
		return
	}
	r.dirs.mu.Lock()
	defer r.dirs.mu.Unlock()
	for dir, fd := range r.dirs.fds {
		rawClose(fd)
		dirFDsOpen.Add(-1)
		delete(r.dirs.fds, dir)
	}
}
