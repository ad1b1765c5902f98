// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
)

// corpusDir holds one directory per real machine or driver: root/ is the
// machine's /proc and /sys subset, second/ (optional) is laid over root/
// before the second reading, golden.yaml is what the agent must publish.
// testdata/corpus/README.md says where each machine comes from.
const corpusDir = "testdata/corpus"

// corpusAbsoluteLimitMilliCelsius is the default absoluteLimitCelsius (90 °C)
// that the goldens' effective headroom is computed with.
const corpusAbsoluteLimitMilliCelsius = 90_000

// golden is a machine's golden.yaml.
type golden struct {
	// Machine describes the hardware in a few words.
	Machine string `json:"machine"`
	// IntervalSeconds is the time between the two readings.
	IntervalSeconds int `json:"intervalSeconds"`
	// Faults are host paths whose reads fail with an errno (EACCES, EIO):
	// what a tree in git cannot hold, such as energy_uj at mode 0400 read
	// by a non-root agent (the test may run as root, which no mode stops).
	Faults map[string]string `json:"faults"`
	// Expect maps a field (see gotFields) to its expected value and the
	// document or raw file that justifies it.
	Expect map[string]expectation `json:"expect"`
}

type expectation struct {
	// Value is the expected value; null means the field must be absent.
	Value any    `json:"value"`
	Ref   string `json:"ref"`
}

var errnos = map[string]error{
	"EACCES":  syscall.EACCES,
	"EIO":     syscall.EIO,
	"ENODATA": syscall.ENODATA,
}

// TestCorpus runs the real agent (the collectors of agent/app, less NVML
// and the kubelet's pod resources) over each corpus machine, reads twice
// an interval apart, and compares the status with the machine's golden
// file field by field.
func TestCorpus(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join(corpusDir, "*", "golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(goldens) < 12 {
		t.Fatalf("corpus has %d machines, want at least 12", len(goldens))
	}
	for _, gf := range goldens {
		dir := filepath.Dir(gf)
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(gf)
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			if err := yaml.UnmarshalStrict(b, &g); err != nil {
				t.Fatalf("%s: %v", gf, err)
			}
			if g.IntervalSeconds <= 0 {
				t.Fatalf("%s: intervalSeconds must be positive", gf)
			}
			host := t.TempDir()
			copyTree(t, filepath.Join(dir, "root"), host)
			faults := make(map[string]error, len(g.Faults))
			for p, e := range g.Faults {
				errno, ok := errnos[e]
				if !ok {
					t.Fatalf("%s: fault %q on %s: want one of EACCES, EIO, ENODATA", gf, e, p)
				}
				faults[p] = errno
			}
			root := hostfs.New(host).WithFaults(faults)
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakePassiveClock(t0)
			sampler, err := agent.NewSampler(agent.SamplerConfig{
				Collectors: []collector.Collector{
					collector.NewCPUCollector(root),
					collector.NewMemoryCollector(root),
					collector.NewNUMACollector(root),
					collector.NewThermalCollector(root),
					collector.NewPowerCollector(root).WithClock(clk),
				},
				Interval:     time.Duration(g.IntervalSeconds) * time.Second,
				AgentVersion: "corpus",
				PowerModel:   powermodel.DefaultConfig(),
				Heat:         status.DefaultHeatConfig(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			sampler.Observe(ctx, t0)
			if second := filepath.Join(dir, "second"); exists(second) {
				copyTree(t, second, host)
			}
			clk.SetTime(t0.Add(time.Duration(g.IntervalSeconds) * time.Second))
			obs := sampler.Observe(ctx, clk.Now())
			got := gotFields(t, obs)

			keys := make([]string, 0, len(g.Expect))
			for k := range g.Expect {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				want := g.Expect[k]
				if want.Ref == "" {
					t.Errorf("%s: %s has no ref", name, k)
				}
				g, ok := got[k]
				if !ok {
					t.Errorf("%s: %s: unknown field in golden.yaml", name, k)
					continue
				}
				if diff := cmp.Diff(normalize(t, want.Value), normalize(t, g)); diff != "" {
					t.Errorf("%s: %s (-want +got):\n%s\tref: %s", name, k, diff, want.Ref)
				}
			}
			if t.Failed() {
				js, _ := json.MarshalIndent(obs.Status, "", "  ")
				t.Logf("%s: the agent's status:\n%s", name, js)
			}
		})
	}
}

// gotFields flattens what the goldens check out of an observation, keyed
// as in golden.yaml. Fields come from the status's JSON, so a golden names
// them as `kubectl get nt -o yaml` shows them.
func gotFields(t *testing.T, obs agent.Observation) map[string]any {
	t.Helper()
	js, err := json.Marshal(obs.Status)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(js, &st); err != nil {
		t.Fatal(err)
	}
	th, _ := st["thermal"].(map[string]any)
	pw, _ := st["power"].(map[string]any)
	out := map[string]any{}
	for _, f := range []string{"hottestSensor", "hottestMilliCelsius", "limitMilliCelsius", "limitType",
		"headroomMilliCelsius", "headroomSensor", "hottestUnlimitedSensor", "hottestUnlimitedMilliCelsius",
		"throttling", "alarms"} {
		out["thermal."+f] = th[f]
	}
	// effective headroom: min(headroom, absolute limit - hottest unlimited),
	// the rule EnergyAware and the agent's heat state apply.
	var eff any
	if h, ok := th["headroomMilliCelsius"].(float64); ok {
		eff = h
	}
	if u, ok := th["hottestUnlimitedMilliCelsius"].(float64); ok {
		if e, ok := eff.(float64); !ok || corpusAbsoluteLimitMilliCelsius-u < e {
			eff = corpusAbsoluteLimitMilliCelsius - u
		}
	}
	out["thermal.effectiveHeadroomMilliCelsius"] = eff
	out["overheating"] = nil
	if conds, ok := st["conditions"].([]any); ok {
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Overheating" {
				out["overheating"] = m["status"] == "True"
			}
		}
	}
	out["power.watts"] = pw["watts"]
	out["power.sources"] = pw["sources"]
	for _, src := range []string{"thermal", "power", "numa", "cpu"} {
		out["sources."+src+".state"] = nil
		out["sources."+src+".reason"] = nil
	}
	if srcs, ok := st["sources"].([]any); ok {
		for _, s := range srcs {
			m, _ := s.(map[string]any)
			name, _ := m["name"].(string)
			out["sources."+name+".state"] = m["state"]
			out["sources."+name+".reason"] = m["reason"]
		}
	}
	var numa []any
	if nodes, ok := st["numa"].([]any); ok {
		for _, n := range nodes {
			m, _ := n.(map[string]any)
			numa = append(numa, map[string]any{"id": m["id"], "cpus": m["cpus"], "distances": m["distances"]})
		}
	}
	out["numa"] = numa
	return out
}

// normalize makes YAML and JSON values comparable (numbers as float64).
func normalize(t *testing.T, v any) any {
	t.Helper()
	if v == nil {
		return nil
	}
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	if s, ok := out.([]any); ok && len(s) == 0 {
		return nil
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// copyTree copies src over dst, keeping symbolic links as links.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(target)
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(fmt.Errorf("copying %s: %w", src, err))
	}
}
