// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"encoding/json"
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

// TestBinariesLogJSON: with --logging-format=json the agent writes its log
// as one JSON object a line, as Kubernetes components do, and the
// descheduler and both relays take the flag.
func TestBinariesLogJSON(t *testing.T) {
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "telesched-agent"), "--once", "--once-window=100ms", "--nvml=false", "--logging-format=json")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("telesched-agent --once --logging-format=json: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil || entry["msg"] == nil {
			t.Errorf("log line %q is not a JSON object with a msg (%v)", l, err)
		}
	}
	if len(lines) == 0 || lines[0] == "" {
		t.Error("the agent logged nothing")
	}
	for _, args := range [][]string{{"telesched-descheduler"}, {"telesched-agent", "podresources-relay"}, {"telesched-agent", "powercap-relay"}} {
		out, _ := exec.Command(filepath.Join(binDir, args[0]), append(args[1:], "--help")...).CombinedOutput()
		if !strings.Contains(string(out), "--logging-format") {
			t.Errorf("%s --help has no --logging-format", strings.Join(args, " "))
		}
	}
}
