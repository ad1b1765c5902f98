// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package proc runs a child process that stops gracefully: interrupted,
// waited for, killed only when it does not exit in time.
package proc

import (
	"os"
	"os/exec"
	"sync"
	"time"
)

// DefaultGrace is how long Stop waits after the interrupt before it kills.
const DefaultGrace = 10 * time.Second

// Process is a started command.
type Process struct {
	cmd    *exec.Cmd
	grace  time.Duration
	done   chan struct{}
	err    error
	stopMu sync.Once
}

// Start starts cmd; Stop interrupts it after, waiting grace before killing.
func Start(cmd *exec.Cmd, grace time.Duration) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, grace: grace, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Exited is closed once the process has exited; Err then says how.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Err is what waiting for the process returned; valid once Exited is
// closed.
func (p *Process) Err() error { return p.err }

// Stop interrupts the process and waits for it to exit, killing it after
// the grace period. Later calls do nothing.
func (p *Process) Stop() {
	p.stopMu.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(p.grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// Kill kills the process and waits for it.
func (p *Process) Kill() error {
	err := p.cmd.Process.Kill()
	<-p.done
	return err
}
