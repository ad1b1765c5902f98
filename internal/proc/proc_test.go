// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package proc

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestStopInterruptsThenKills: a process that exits on the interrupt is
// stopped by it; one that ignores it is killed after the grace period.
func TestStopInterruptsThenKills(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if err := p.Err(); err == nil || err.Error() != "signal: interrupt" {
		t.Errorf("sleep after Stop: %v, want signal: interrupt", err)
	}
	p.Stop() // a second call does nothing

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", `trap "" INT; echo ready; exec sleep 60`)
	cmd.Stdout = w
	stubborn, err := Start(cmd, 200*time.Millisecond)
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("waiting for the trap to be set: %q, %v", line, err)
	}
	stubborn.Stop()
	if err := stubborn.Err(); err == nil || err.Error() != "signal: killed" {
		t.Errorf("a process that ignores the interrupt, after Stop: %v, want signal: killed", err)
	}
	select {
	case <-stubborn.Exited():
	default:
		t.Error("Exited not closed after Stop")
	}
}
