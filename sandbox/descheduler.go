// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/telesched/telesched/internal/proc"
)

// deschedulerPerNode is the descheduler's --max-evictions-per-node-per-cycle
// in the sandbox: its default, written out because rackBound counts on it.
const deschedulerPerNode = 2

// startDescheduler runs the telesched-descheduler binary of the bin
// directory against the sandbox's API server, evicting (not dry-run),
// every DeschedulerInterval, with ThermalSustain; its log is
// logs/descheduler.log. stop interrupts it and waits.
func (s *sandbox) startDescheduler(ctx context.Context) (stop func(), err error) {
	bin := filepath.Join(s.binDir, "telesched-descheduler")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run `make build`, or --descheduler=off)", bin, err)
	}
	p, path, err := s.runDescheduler("descheduler.log")
	if err != nil {
		return nil, err
	}
	// It exits at once on a bad flag or config: look for a second.
	select {
	case <-p.Exited():
		return nil, fmt.Errorf("telesched-descheduler exited (%v); the end of %s:\n%s", p.Err(), path, tailFile(path, 15))
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), p.Kill())
	case <-time.After(time.Second):
	}
	s.printf("    telesched-descheduler runs: --interval=%v --thermal-sustain=%v --budget-sustain=%v --max-evictions-per-node-per-cycle=%d --dry-run=false (log: %s)\n",
		s.opts.DeschedulerInterval, s.opts.ThermalSustain, s.opts.BudgetSustain, deschedulerPerNode, path)
	return p.Stop, nil
}

// runDescheduler starts the telesched-descheduler binary against the
// sandbox's API server, evicting, with the sandbox's --interval,
// --thermal-sustain, --budget-sustain and per-node limit, then extra; it
// logs to logs/<log>, whose path it returns.
func (s *sandbox) runDescheduler(log string, extra ...string) (*proc.Process, string, error) {
	path := filepath.Join(s.dir, "logs", log)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, "", err
	}
	// The child has its own descriptor once started.
	defer func() { _ = f.Close() }()
	args := append([]string{"--kubeconfig=" + s.res.Kubeconfig, "--dry-run=false", "--metrics-bind-address=",
		"--interval=" + s.opts.DeschedulerInterval.String(), "--thermal-sustain=" + s.opts.ThermalSustain.String(),
		"--budget-sustain=" + s.opts.BudgetSustain.String(), fmt.Sprintf("--max-evictions-per-node-per-cycle=%d", deschedulerPerNode), "-v=2"}, extra...)
	cmd := exec.Command(filepath.Join(s.binDir, "telesched-descheduler"), args...)
	cmd.Stdout, cmd.Stderr = f, f
	p, err := proc.Start(cmd, proc.DefaultGrace)
	if err != nil {
		return nil, "", err
	}
	return p, path, nil
}
