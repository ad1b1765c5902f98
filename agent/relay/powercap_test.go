// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeCounter(t *testing.T, root, zone, value string) {
	t.Helper()
	dir := filepath.Join(root, zone)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "energy_uj"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startPowercap runs the relay on a tree of its own until the test ends.
func startPowercap(t *testing.T, minInterval time.Duration) (socket, root string) {
	t.Helper()
	dir := t.TempDir()
	root, socket = filepath.Join(dir, "powercap"), filepath.Join(dir, "powercap.sock")
	writeCounter(t, root, "intel-rapl/intel-rapl:0", "1000")
	writeCounter(t, root, "intel-rapl/intel-rapl:0/intel-rapl:0:2", "20")
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("not a counter\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- RunPowercap(ctx, PowercapOptions{Listen: socket, Root: root, Mode: DefaultMode, MinInterval: minInterval, MaxConnections: 2})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return socket, root
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay does not listen")
		}
	}
}

// TestPowercapRelayServesCountersOnly: the relay answers the counters of
// the zones asked for, in order, and refuses a name that is not a
// powercap zone's (a path out of its root, a file that is no counter),
// naming it; its socket has the mode asked for.
func TestPowercapRelayServesCountersOnly(t *testing.T) {
	socket, _ := startPowercap(t, 10*time.Millisecond)
	got, err := ReadPowercap(socket, []string{"intel-rapl/intel-rapl:0/intel-rapl:0:2", "intel-rapl/intel-rapl:0"})
	if err != nil || len(got) != 2 || got[0] != 20 || got[1] != 1000 {
		t.Errorf("ReadPowercap = %v, %v; want [20 1000]", got, err)
	}
	for _, zone := range []string{"../powercap.sock", "intel-rapl/../../etc", "/etc", "intel-rapl:0/..", ".", ""} {
		if _, err := ReadPowercap(socket, []string{zone}); err == nil {
			t.Errorf("zone %q: served", zone)
		}
	}
	if _, err := ReadPowercap(socket, []string{"intel-rapl/intel-rapl:9"}); err == nil || !strings.Contains(err.Error(), "intel-rapl:9") {
		t.Errorf("a zone that is not there: err %v, want it named", err)
	}
	fi, err := os.Stat(socket)
	if err != nil || fi.Mode().Perm() != DefaultMode {
		t.Errorf("socket mode %v (%v), want %#o", fi.Mode().Perm(), err, DefaultMode)
	}
}

// TestPowercapRelayReadsACounterOnceAnInterval: within MinInterval a
// counter's last value is served again; after it, the file is read anew.
func TestPowercapRelayReadsACounterOnceAnInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	socket, root := startPowercap(t, interval)
	zone := []string{"intel-rapl/intel-rapl:0"}
	first, err := ReadPowercap(socket, zone)
	if err != nil {
		t.Fatal(err)
	}
	writeCounter(t, root, zone[0], "5000")
	again, err := ReadPowercap(socket, zone)
	if err != nil || again[0] != first[0] {
		t.Errorf("read again within the interval: %v, %v; want the last value %d", again, err, first[0])
	}
	time.Sleep(interval + 50*time.Millisecond)
	later, err := ReadPowercap(socket, zone)
	if err != nil || later[0] != 5000 {
		t.Errorf("read after the interval: %v, %v; want 5000", later, err)
	}
}

func TestPowercapOptionsValidate(t *testing.T) {
	ok := PowercapOptions{Listen: "/run/x.sock", Root: DefaultPowercapRoot, Mode: DefaultMode, MinInterval: time.Second, MaxConnections: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]PowercapOptions{
		"--listen":          {Root: ok.Root, Mode: ok.Mode, MinInterval: ok.MinInterval, MaxConnections: 1},
		"--powercap-root":   {Listen: ok.Listen, Root: "relative", Mode: ok.Mode, MinInterval: ok.MinInterval, MaxConnections: 1},
		"--socket-mode":     {Listen: ok.Listen, Root: ok.Root, Mode: 0o400, MinInterval: ok.MinInterval, MaxConnections: 1},
		"--min-interval":    {Listen: ok.Listen, Root: ok.Root, Mode: ok.Mode, MinInterval: time.Microsecond, MaxConnections: 1},
		"--max-connections": {Listen: ok.Listen, Root: ok.Root, Mode: ok.Mode, MinInterval: ok.MinInterval},
	} {
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err %v, want it named", name, err)
		}
	}
}
