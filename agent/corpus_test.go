package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/powermodel"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/heat"
)

// corpusDir holds one directory per real machine (see its README.md):
// root/ is the machine's /proc and /sys subset at the first reading,
// second/ the files that changed by the second reading, golden.yaml what
// the agent must report, each value with the document that justifies it.
const corpusDir = "testdata/corpus"

// corpusInterval is the time between the two readings of every machine;
// the energy counters of the second/ overlays advance by watts × 10 s.
const corpusInterval = 10 * time.Second

// goldenValue is one expected value and where it comes from.
type goldenValue struct {
	Value json.RawMessage `json:"value"`
	Ref   string          `json:"ref"`
}

// golden is a machine's golden.yaml. Sections map a field name to its
// expected value; a field left out of the file is not checked.
type golden struct {
	Machine string `json:"machine"`
	// RootOnly lists host files that are root-only (mode 0400, owner
	// root) on the real machine. Git cannot keep that for a non-root
	// reader, so the test takes every permission away from them; run as
	// root, the kernel lets the read through anyway and the section that
	// depends on them is skipped.
	RootOnly []string               `json:"rootOnly"`
	Thermal  map[string]goldenValue `json:"thermal"`
	Power    map[string]goldenValue `json:"power"`
	NUMA     map[string]goldenValue `json:"numa"`
}

// numaNode is what the golden files say of a NUMA node.
type numaNode struct {
	ID        int32   `json:"id"`
	CPUs      string  `json:"cpus"`
	Distances []int32 `json:"distances"`
}

func TestCorpus(t *testing.T) {
	machines, err := filepath.Glob(filepath.Join(corpusDir, "*", "golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(machines) < 12 {
		t.Fatalf("corpus has %d machines with a golden.yaml, want at least 12", len(machines))
	}
	for _, g := range machines {
		dir := filepath.Dir(g)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			runMachine(t, dir)
		})
	}
}

func runMachine(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want golden
	if err := yaml.UnmarshalStrict(data, &want); err != nil {
		t.Fatalf("%s/golden.yaml: %v", dir, err)
	}
	if want.Machine != filepath.Base(dir) {
		t.Fatalf("golden.yaml names machine %q, directory is %q", want.Machine, filepath.Base(dir))
	}

	root := t.TempDir()
	copyTree(t, filepath.Join(dir, "root"), root)
	rootOnlyDenied := true
	for _, p := range want.RootOnly {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.Chmod(full, 0); err != nil {
			t.Fatalf("rootOnly %s: %v", p, err)
		}
		if f, err := os.Open(full); err == nil {
			f.Close()
			rootOnlyDenied = false
		}
	}

	host := hostfs.New(root)
	collectors := []collector.Collector{
		collector.NewCPUCollector(host),
		collector.NewMemoryCollector(host),
		collector.NewNUMACollector(host),
		collector.NewThermalCollector(host),
		collector.NewPowerCollector(host),
	}
	sampler, err := agent.NewSampler(agent.SamplerConfig{
		Collectors:   collectors,
		Interval:     corpusInterval,
		AgentVersion: "corpus",
		PowerModel:   powermodel.DefaultConfig(),
		Heat:         status.DefaultHeatConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := context.Background()
	first := sampler.Observe(ctx, t0)
	if second := filepath.Join(dir, "second"); exists(second) {
		copyTree(t, second, root)
		for _, p := range want.RootOnly {
			if err := os.Chmod(filepath.Join(root, filepath.FromSlash(p)), 0); err != nil {
				t.Fatalf("rootOnly %s: %v", p, err)
			}
		}
	}
	obs := sampler.Observe(ctx, t0.Add(corpusInterval))

	if os.Getenv("CORPUS_DEBUG") != "" {
		for _, s := range obs.Status.Sources {
			t.Logf("source %s %s %s %s", s.Name, s.State, s.Reason, s.Message)
		}
		t.Logf("cpu %+v %+v", obs.Status.CPU, obs.Status.CPU.ThermalThrottle)
	}
	got := observed(first, obs)
	check := func(section string, fields map[string]goldenValue) {
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w := fields[k]
			if w.Ref == "" {
				t.Errorf("%s: %s.%s has no ref", want.Machine, section, k)
			}
			g, ok := got[section+"."+k]
			if !ok {
				t.Errorf("%s: golden field %s.%s is not one the test knows", want.Machine, section, k)
				continue
			}
			if !sameJSON(t, w.Value, g) {
				gj, _ := json.Marshal(g)
				t.Errorf("%s: %s.%s = %s, want %s\n\tref: %s", want.Machine, section, k, gj, compact(w.Value), w.Ref)
			}
		}
	}
	t.Run("thermal", func(t *testing.T) { check("thermal", want.Thermal) })
	t.Run("power", func(t *testing.T) {
		if len(want.RootOnly) > 0 && !rootOnlyDenied {
			t.Skipf("%s: the root-only files %v stay readable to this process (running as root), so PermissionDenied cannot be shown; run the test as a non-root user", want.Machine, want.RootOnly)
		}
		check("power", want.Power)
	})
	t.Run("numa", func(t *testing.T) { check("numa", want.NUMA) })
}

// observed flattens what the golden files check, from the first and the
// second observation, into "section.field" values.
func observed(first, obs agent.Observation) map[string]any {
	got := map[string]any{}
	st := obs.Status
	for _, s := range st.Sources {
		switch s.Name {
		case telemetryv1alpha1.SourceThermal, telemetryv1alpha1.SourcePower, telemetryv1alpha1.SourceNUMA:
			got[string(s.Name)+".state"] = s.State
			got[string(s.Name)+".reason"] = s.Reason
		}
	}
	for _, s := range first.Status.Sources {
		if s.Name == telemetryv1alpha1.SourcePower {
			got["power.firstState"] = s.State
			got["power.firstReason"] = s.Reason
		}
	}

	th := st.Thermal
	got["thermal.present"] = th != nil
	if th != nil {
		got["thermal.hottestSensor"] = th.HottestSensor
		got["thermal.hottestMilliCelsius"] = th.HottestMilliCelsius
		got["thermal.limitMilliCelsius"] = th.LimitMilliCelsius
		got["thermal.limitType"] = nilIfEmpty(string(th.LimitType))
		got["thermal.headroomMilliCelsius"] = th.HeadroomMilliCelsius
		got["thermal.headroomSensor"] = nilIfEmpty(th.HeadroomSensor)
		got["thermal.hottestUnlimitedSensor"] = nilIfEmpty(th.HottestUnlimitedSensor)
		got["thermal.hottestUnlimitedMilliCelsius"] = th.HottestUnlimitedMilliCelsius
		got["thermal.throttling"] = th.Throttling
		got["thermal.alarms"] = th.Alarms
		got["thermal.sensorCount"] = len(th.Sensors)
		sensors := map[string]any{}
		for _, s := range th.Sensors {
			sensors[s.Name] = map[string]any{"milliCelsius": s.MilliCelsius, "limitMilliCelsius": s.LimitMilliCelsius, "alarm": s.Alarm}
		}
		got["thermal.sensors"] = sensors
	}
	h := heat.OfStatus(th, obs.AbsoluteLimitMilliCelsius)
	if h.Known {
		got["thermal.effectiveHeadroomMilliCelsius"] = h.MilliCelsius
	} else {
		got["thermal.effectiveHeadroomMilliCelsius"] = nil
	}
	got["thermal.overheating"] = obs.Heat.Hot

	got["power.watts"] = nil
	got["power.sources"] = nil
	if p := st.Power; p != nil {
		got["power.watts"] = p.Watts
		got["power.sources"] = p.Sources
	}
	got["power.firstWatts"] = nil
	if p := first.Status.Power; p != nil {
		got["power.firstWatts"] = p.Watts
	}

	var nodes []numaNode
	for _, n := range st.NUMA {
		nodes = append(nodes, numaNode{ID: n.ID, CPUs: n.CPUs, Distances: n.Distances})
	}
	got["numa.nodes"] = nodes
	return got
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// sameJSON compares a golden value with a Go value through their JSON
// forms, so 61000 and int64(61000) agree and an empty list equals null.
func sameJSON(t *testing.T, want json.RawMessage, got any) bool {
	t.Helper()
	gj, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var w, g any
	if len(want) == 0 {
		want = json.RawMessage("null")
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gj, &g); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(normalize(w), normalize(g))
}

// normalize drops null and empty-list distances so that a node without
// distances reads the same either way.
func normalize(v any) any {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i := range x {
			x[i] = normalize(x[i])
		}
	case map[string]any:
		for k, e := range x {
			if n := normalize(e); n == nil {
				delete(x, k)
			} else {
				x[k] = n
			}
		}
	}
	return v
}

func compact(b json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// copyTree copies src onto dst: directories, regular files (writable by
// the owner, so a later overlay can replace them) and symbolic links as
// they are.
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
			_ = os.Remove(target) // may be a root-only file the test made unreadable
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
