// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/relay"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// The agent's and the relay's identities in the shipped DaemonSets
// (deploy/agent/daemonset.yaml): the pod runs as uid and gid 48811, the
// powercap-relay container as uid 0; neither holds a capability.
const (
	agentUID   = 48811
	relayChild = "TELESCHED_POWERCAP_RELAY_CHILD"
	agentChild = "TELESCHED_POWERCAP_AGENT_CHILD"
)

// relayResult is what the agent child reports.
type relayResult struct {
	Direct   string  `json:"direct"` // the SourceError without the relay
	Watts    float64 `json:"watts"`
	Sources  []string
	Zones    []string
	ReadErr  string `json:"readErr"`
	ReadUser int    `json:"uid"`
}

// TestRAPLThroughThePowercapRelay: on a tree whose energy_uj files are
// root's, mode 0400, as Linux has made them since 5.10 (CVE-2020-8694,
// commit 949dd0104c49 "powercap: restrict energy meter to root access";
// the layout is the server fixture's, class entries linking into
// /sys/devices/virtual/powercap), the agent running as the shipped
// DaemonSet runs it (uid and gid 48811, no capabilities) cannot read RAPL
// (PermissionDenied), and reads it through the powercap relay, which runs
// as the shipped powercap-relay container does (uid 0, gid 48811, no
// capabilities): package and dram watts from the counters' rise.
func TestRAPLThroughThePowercapRelay(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to make files only root may read and to run the agent and the relay as their users")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs util-linux's setpriv to drop capabilities")
	}
	root := serverWithoutACPIMeter(t)
	counters := []string{raplPkg0, raplDram0, raplPkg1, raplDram1}
	var step atomic.Int64
	write := func() {
		n := step.Add(1)
		for i, p := range counters {
			// package-0 +1 J a step, the others less; written whole
			// (rename), so no read sees a half-written file.
			v := uint64(n) * 1_000_000 / uint64(i+1)
			full, err := filepath.EvalSymlinks(root.Path(p))
			if err != nil {
				t.Error(err)
				return
			}
			tmp := full + ".tmp"
			if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", v)), 0o400); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, full); err != nil {
				t.Error(err)
				return
			}
		}
	}
	write()
	// The users must reach the tree and the test binary.
	for _, dir := range []string{filepath.Dir(root.Dir()), root.Dir()} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := t.TempDir()
	if err := os.Chmod(filepath.Dir(run), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(run, "collector.test")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(run, "powercap.sock")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	relayCmd := exec.CommandContext(ctx, setpriv, "--reuid=0", fmt.Sprintf("--regid=%d", agentUID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", bin, "-test.run=^TestPowercapRelayChild$")
	relayCmd.Env = append(os.Environ(), relayChild+"="+socket+","+root.Path("/sys/devices/virtual/powercap"))
	var relayLog strings.Builder
	relayCmd.Stdout, relayCmd.Stderr = &relayLog, &relayLog
	if err := relayCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = relayCmd.Wait()
		if t.Failed() {
			t.Logf("the relay's output:\n%s", relayLog.String())
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not listen on %s", socket)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The counters rise by a step each 50 ms while the agent reads.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				write()
			}
		}
	}()

	agentCmd := exec.CommandContext(ctx, setpriv, fmt.Sprintf("--reuid=%d", agentUID), fmt.Sprintf("--regid=%d", agentUID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", bin, "-test.run=^TestPowercapAgentChild$")
	agentCmd.Env = append(os.Environ(), agentChild+"="+socket+","+root.Dir())
	out, err := agentCmd.Output()
	if err != nil {
		t.Fatalf("the agent child: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "{") {
			line = l
		}
	}
	var got relayResult
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the agent child printed %q: %v", out, err)
	}
	t.Logf("the agent (uid %d): without the relay %s; through it %.1f W from %v, zones %v", got.ReadUser, got.Direct, got.Watts, got.Sources, got.Zones)
	if got.ReadUser != agentUID {
		t.Errorf("the agent child ran as uid %d, want %d", got.ReadUser, agentUID)
	}
	if !strings.Contains(got.Direct, "PermissionDenied") {
		t.Errorf("without the relay the agent read RAPL (%q): the files are not root's", got.Direct)
	}
	if got.ReadErr != "" {
		t.Fatalf("through the relay: %s", got.ReadErr)
	}
	// package-0 rises 1 J each 50 ms (20 W), dram-0 0.5 J (10 W),
	// package-1 and dram-1 a third and a quarter: ~41.7 W in all.
	if got.Watts < 30 || got.Watts > 55 || len(got.Sources) != 1 || got.Sources[0] != string(telemetryv1alpha1.PowerSourceRAPL) {
		t.Errorf("through the relay: %.1f W from %v, want about 42 W from rapl", got.Watts, got.Sources)
	}
	if want := "package-0,dram-0,package-1,dram-1"; strings.Join(got.Zones, ",") != want {
		t.Errorf("zones %v, want %s", got.Zones, want)
	}
}

// TestPowercapRelayChild is the relay, as TestRAPLThroughThePowercapRelay
// starts it.
func TestPowercapRelayChild(t *testing.T) {
	env := os.Getenv(relayChild)
	if env == "" {
		t.Skip("run by TestRAPLThroughThePowercapRelay")
	}
	socket, dir, _ := strings.Cut(env, ",")
	err := relay.RunPowercap(context.Background(), relay.PowercapOptions{Listen: socket, Root: dir, Mode: relay.DefaultMode,
		MinInterval: relay.DefaultPowercapMinInterval, MaxConnections: relay.DefaultMaxConnections})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPowercapAgentChild is the agent's power collector, as
// TestRAPLThroughThePowercapRelay starts it: it reads without the relay,
// then through it twice a second apart, and prints what it got as JSON.
func TestPowercapAgentChild(t *testing.T) {
	env := os.Getenv(agentChild)
	if env == "" {
		t.Skip("run by TestRAPLThroughThePowercapRelay")
	}
	socket, dir, _ := strings.Cut(env, ",")
	res := relayResult{ReadUser: os.Getuid()}
	ctx := context.Background()
	direct := NewPowerCollector(hostfs.New(dir))
	err := direct.Collect(ctx, &Sample{Time: time.Now()})
	res.Direct = fmt.Sprint(err)
	c := NewPowerCollector(hostfs.New(dir)).WithRAPLRelay(socket)
	s := &Sample{Time: time.Now()}
	if err := c.Collect(ctx, s); err != nil && err != ErrWarmingUp {
		res.ReadErr = err.Error()
	}
	time.Sleep(time.Second)
	s = &Sample{Time: time.Now()}
	if err := c.Collect(ctx, s); err != nil {
		res.ReadErr = err.Error()
	}
	if s.Power != nil {
		res.Watts = s.Power.Watts
		for _, src := range s.Power.Sources {
			res.Sources = append(res.Sources, string(src))
		}
		for _, z := range s.Power.Zones {
			res.Zones = append(res.Zones, z.Name)
		}
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
