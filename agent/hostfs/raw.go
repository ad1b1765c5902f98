// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"syscall"
	"unsafe"
)

// The per-sample reads of procfs and sysfs go to the kernel as raw system
// calls, which do not tell the Go scheduler they are in the kernel. A
// system call made through package syscall does (entersyscall), and while
// every P is idle that wakes the runtime's monitor thread (sysmon) from its
// deep sleep and resets its back-off: it then polls every 20 µs for about
// a millisecond and backs off to 10 ms before sleeping again
// (runtime/proc.go, sysmon). A process that sleeps between short bursts of
// system calls pays for that on every burst. These files answer from
// memory or from a driver that reads a register or a sensor; a slow one
// holds its P for the read's duration instead of handing it to another
// thread, which a single sampling goroutine can afford.

// atFDCWD is AT_FDCWD, the working directory as a directory descriptor.
const atFDCWD = -100

// oPath is O_PATH: a descriptor that only stands for its directory's place
// in the tree, for openat(2) (Linux 2.6.39).
const oPath = 0x200000

// rawOpen opens name read-only and close-on-exec.
func rawOpen(name string) (int, error) {
	return rawOpenAt(atFDCWD, name)
}

// rawOpenAt opens name, relative to the directory descriptor dirfd,
// read-only and close-on-exec.
func rawOpenAt(dirfd int, name string) (int, error) {
	return openat(dirfd, name, syscall.O_RDONLY|syscall.O_CLOEXEC)
}

// rawOpenDir opens the directory name as an O_PATH descriptor, following
// symbolic links (/sys/class/hwmon/hwmonN is one).
func rawOpenDir(name string) (int, error) {
	return openat(atFDCWD, name, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC)
}

func openat(dirfd int, name string, flags int) (int, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	for {
		fd, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags), 0, 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case syscall.EINTR:
			continue
		default:
			return -1, errno
		}
	}
}

// rawRead reads into b, which must not be empty.
func rawRead(fd int, b []byte) (int, error) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return 0, errno
		}
	}
}

func rawClose(fd int) { _, _, _ = syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

// rawExists reports whether name exists, following symbolic links as
// stat(2) does.
func rawExists(name string) bool { return rawLookup(name) == nil }

// rawLookup resolves name as stat(2) does, following symbolic links, and
// returns why it does not resolve: ENOENT, EACCES (a directory on the way
// that this process may not search), ...
func rawLookup(name string) error {
	cwd := atFDCWD
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	for {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_FACCESSAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), 0 /* F_OK */, 0, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}
