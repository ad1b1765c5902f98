// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

var (
	// ErrNotSupported means the GPU does not have the reading
	// (NVML_ERROR_NOT_SUPPORTED), or has it switched off, as ECC counters
	// with ECC disabled.
	ErrNotSupported = errors.New("not supported by the device")
	// ErrLibraryNotFound means NVML cannot be used on this node:
	// libnvidia-ml.so.1 cannot be loaded (NVML_ERROR_LIBRARY_NOT_FOUND) or
	// the NVIDIA kernel driver is not loaded (NVML_ERROR_DRIVER_NOT_LOADED).
	ErrLibraryNotFound = errors.New("NVML library or NVIDIA driver not found")
	// errNotInitialized is returned by calls made before Init succeeded.
	errNotInitialized = errors.New("NVML is not initialized")
)

// Error is an NVML return code other than success. It Is ErrNotSupported
// or ErrLibraryNotFound for the codes those stand for.
type Error struct {
	// Op is the NVML call that failed, e.g. "nvmlDeviceGetPowerUsage".
	Op string
	// Code is the nvmlReturn_t value.
	Code int
	// Text is NVML's string for the code, e.g. "ERROR_GPU_IS_LOST".
	Text string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (NVML return code %d)", e.Op, e.Text, e.Code)
}

// Is reports whether the code is one that target stands for.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotSupported:
		return e.Code == int(gonvml.ERROR_NOT_SUPPORTED)
	case ErrLibraryNotFound:
		return e.Code == int(gonvml.ERROR_LIBRARY_NOT_FOUND) || e.Code == int(gonvml.ERROR_DRIVER_NOT_LOADED)
	}
	return false
}

// errorFor converts the return code of the NVML call op to an error, nil
// for success.
func errorFor(op string, r gonvml.Return) error {
	if r == gonvml.SUCCESS {
		return nil
	}
	return &Error{Op: op, Code: int(r), Text: r.Error()}
}
