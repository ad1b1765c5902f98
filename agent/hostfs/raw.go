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

// atFDCWD is AT_FDCWD (-100) as a system call argument.
var atFDCWD = func() uintptr { v := -100; return uintptr(v) }()

// rawOpen opens name read-only and close-on-exec.
func rawOpen(name string) (int, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	for {
		fd, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
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
func rawExists(name string) bool {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return false
	}
	for {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_FACCESSAT, atFDCWD, uintptr(unsafe.Pointer(p)), 0 /* F_OK */, 0, 0, 0)
		if errno != syscall.EINTR {
			return errno == 0
		}
	}
}
