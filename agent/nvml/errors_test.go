// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"fmt"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestErrorFor(t *testing.T) {
	tests := []struct {
		name             string
		ret              gonvml.Return
		wantNil          bool
		wantNotSupported bool
		wantNoLibrary    bool
		wantError        *Error
	}{
		{
			name:    "success is no error",
			ret:     gonvml.SUCCESS,
			wantNil: true,
		},
		{
			name:             "not supported",
			ret:              gonvml.ERROR_NOT_SUPPORTED,
			wantNotSupported: true,
			wantError:        &Error{Op: "nvmlDeviceGetPowerUsage", Code: 3, Text: "ERROR_NOT_SUPPORTED"},
		},
		{
			name:          "library not found",
			ret:           gonvml.ERROR_LIBRARY_NOT_FOUND,
			wantNoLibrary: true,
			wantError:     &Error{Op: "nvmlDeviceGetPowerUsage", Code: 12, Text: "ERROR_LIBRARY_NOT_FOUND"},
		},
		{
			name:          "driver not loaded counts as no library",
			ret:           gonvml.ERROR_DRIVER_NOT_LOADED,
			wantNoLibrary: true,
			wantError:     &Error{Op: "nvmlDeviceGetPowerUsage", Code: 9, Text: "ERROR_DRIVER_NOT_LOADED"},
		},
		{
			name:      "GPU lost is a plain failure",
			ret:       gonvml.ERROR_GPU_IS_LOST,
			wantError: &Error{Op: "nvmlDeviceGetPowerUsage", Code: 15, Text: "ERROR_GPU_IS_LOST"},
		},
		{
			name:      "no permission is a plain failure",
			ret:       gonvml.ERROR_NO_PERMISSION,
			wantError: &Error{Op: "nvmlDeviceGetPowerUsage", Code: 4, Text: "ERROR_NO_PERMISSION"},
		},
		{
			name:      "unknown is a plain failure",
			ret:       gonvml.ERROR_UNKNOWN,
			wantError: &Error{Op: "nvmlDeviceGetPowerUsage", Code: 999, Text: "ERROR_UNKNOWN"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := errorFor("nvmlDeviceGetPowerUsage", tc.ret)
			if tc.wantNil {
				if err != nil {
					t.Fatalf("errorFor(%d) = %v, want nil", tc.ret, err)
				}
				return
			}
			// Callers wrap it; the sentinels must still match.
			wrapped := fmt.Errorf("GPU 3: %w", err)
			got := struct{ NotSupported, NoLibrary bool }{errors.Is(wrapped, ErrNotSupported), errors.Is(wrapped, ErrLibraryNotFound)}
			want := struct{ NotSupported, NoLibrary bool }{tc.wantNotSupported, tc.wantNoLibrary}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors.Is (-want +got):\n%s", diff)
			}
			var nerr *Error
			if !errors.As(wrapped, &nerr) {
				t.Fatalf("errors.As(%v, *Error) = false", wrapped)
			}
			if diff := cmp.Diff(tc.wantError, nerr); diff != "" {
				t.Errorf("*Error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	err := errorFor("nvmlDeviceGetTemperature", gonvml.ERROR_GPU_IS_LOST)
	want := "nvmlDeviceGetTemperature: ERROR_GPU_IS_LOST (NVML return code 15)"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}
