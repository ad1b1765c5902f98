// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/telesched/telesched/sandbox/controlplane"
)

// TestBinariesPrintTheirVersion: every telesched binary, as `make build`
// builds it, answers --version with its name, the version the Makefile
// stamped (git describe) and the Kubernetes modules it links, and exits 0;
// the scheduler prints telesched's version, not kube-scheduler's unstamped
// "Kubernetes v0.0.0-master". A flag a binary does not know is named on
// stderr, with exit status 2.
func TestBinariesPrintTheirVersion(t *testing.T) {
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^(telesched-[a-z]+) (\S+) \((.*)\)$`)
	for _, name := range []string{"telesched-agent", "telesched-scheduler", "telesched-sandbox", "telesched-descheduler"} {
		out, err := exec.Command(filepath.Join(binDir, name), "--version").Output()
		if err != nil {
			t.Errorf("%s --version: %v", name, err)
			continue
		}
		got := strings.TrimSpace(string(out))
		m := line.FindStringSubmatch(got)
		if m == nil || m[1] != name {
			t.Errorf("%s --version printed %q, want %q", name, got, name+" VERSION (k8s.io/client-go v…, go… os/arch)")
			continue
		}
		if m[2] == "dev" || m[2] == "" {
			t.Errorf("%s --version: version %q; the Makefile stamps git describe's", name, m[2])
		}
		if !strings.Contains(m[3], "k8s.io/client-go v0.") {
			t.Errorf("%s --version: %q names no client-go", name, m[3])
		}
		if name == "telesched-scheduler" && !strings.Contains(m[3], "k8s.io/kubernetes v1.") {
			t.Errorf("%s --version: %q names no k8s.io/kubernetes", name, m[3])
		}
	}
	for _, name := range []string{"telesched-agent", "telesched-sandbox", "telesched-descheduler"} {
		var stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(binDir, name), "--no-such-flag")
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "--no-such-flag") {
			t.Errorf("%s --no-such-flag: %v, stderr %q; want exit status 2 and the flag named", name, err, stderr.String())
		}
	}
}
