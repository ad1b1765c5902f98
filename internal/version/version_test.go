// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime"
	"strings"
	"testing"
)

// TestLine: the --version line names the binary, the version the build
// set, and Go's version and platform.
func TestLine(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.8.7"
	got := Line("telesched-agent")
	for _, want := range []string{"telesched-agent v9.8.7 (", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH + ")"} {
		if !strings.Contains(got, want) {
			t.Errorf("Line = %q, want it to contain %q", got, want)
		}
	}
	Version = ""
	if got := Get(); got != "dev" {
		t.Errorf("Get with no version set = %q, want dev (a test binary has no module version)", got)
	}
}
