// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs the sandbox's scenario headless, as `make demo` does,
// and checks its outcomes. It needs bin/ (make build); -short skips it.
package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox"
)

// pinnedSensor is the heater's sensor with its temperature in a thermal
// rejection.
var pinnedSensor = regexp.MustCompile(`coretemp/(Package id 0|Core \d+) at `)

func TestSandboxScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole sandbox; skipped in -short mode")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := sandbox.Run(ctx, sandbox.Options{Dir: t.TempDir(), Out: &out, Descheduler: sandbox.DeschedulerSkip})
	t.Logf("sandbox output:\n%s", out.String())
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}

	// Every phase this test checks ran: on the default fleet none may be
	// skipped (a phase's absence would pass its checks vacuously).
	phases := []string{"baseline", "web", "burst", "gpu", "heat-ahead", "heat", "cool"}
	// One exception, named: the heat-ahead node's agent may publish no
	// thermal model within the sandbox's wait (2 of about 10 default-fleet
	// runs on 2 shared cores); the phase then cannot run, and says why.
	noModel := strings.Contains(res.Skipped["heat-ahead"], "published no thermal model")
	if noModel {
		t.Logf("heat-ahead skipped: %s", res.Skipped["heat-ahead"])
		phases = slices.DeleteFunc(phases, func(p string) bool { return p == "heat-ahead" })
	}
	if diff := cmp.Diff(phases, res.Phases); diff != "" {
		t.Errorf("phases that ran (-want +got):\n%s\nskipped: %v", diff, res.Skipped)
	}
	if len(res.Refused) > 0 {
		t.Errorf("pods refused by the racks' budgets: %+v", res.Refused)
	}

	// Nothing went to a node while its telemetry had it at its limit, and
	// the pod pinned to the heater waited for it to cool.
	if len(res.Heat.HotPlacements) > 0 {
		t.Errorf("pods placed on a hot node: %v", res.Heat.HotPlacements)
	}
	if res.Heat.PeakCelsius < 100 {
		t.Errorf("heater peaked at %.1f°C; the scenario must take it past its 100°C limit", res.Heat.PeakCelsius)
	}
	if !res.Heat.ProbeScheduledAfterCooling {
		t.Error("the pod pinned to the heater was not scheduled on it after it cooled")
	}
	// The headroom names the sensor closest to its limit: the package, or a
	// core that reads the same (the simulated cores 0, 3 and 6 do).
	if msgs := strings.Join(res.Rejections["pinned-to-heater"], "\n"); !strings.Contains(msgs, "thermal headroom") || !pinnedSensor.MatchString(msgs) {
		t.Errorf("the pinned pod's FailedScheduling events do not give the thermal numbers: %q", msgs)
	}

	// The busy node (86% CPU, threshold 80%) got no pod; each GPU pod got
	// four GPUs on one NUMA node.
	for _, p := range res.Placements {
		if p.Node == "cpu-busy" {
			t.Errorf("%s placed on cpu-busy (%s)", p.Pod, p.Why)
		}
		if p.Node == res.RealHost {
			t.Errorf("%s placed on the real host, which is tainted", p.Pod)
		}
	}
	for _, pod := range []string{"train-0", "train-1"} {
		gpu, ok := res.PlacementOf(pod)
		if !ok || !gpu.GPUsAligned || len(gpu.GPUs) != 4 {
			t.Errorf("%s = %+v, want 4 GPUs on one NUMA node", pod, gpu)
		}
	}
	if len(res.Placements) != 43 || len(res.Baseline) != 42 {
		t.Errorf("%d telesched and %d baseline placements, want 43 (42 + the pinned pod) and 42", len(res.Placements), len(res.Baseline))
	}
	if res.Energy.TeleschedWatts <= 0 || res.Energy.DefaultWatts <= 0 || res.Energy.TeleschedWork.Total() <= 0 || res.Energy.DefaultWork.Total() <= 0 ||
		res.Energy.TeleschedWork.GPU <= 0 || !strings.Contains(out.String(), "Workload watts") {
		t.Errorf("no workload watts comparison: telesched %+v, default %+v", res.Energy.TeleschedWork, res.Energy.DefaultWork)
	}
	if res.Energy.TeleschedJoules.GPU <= 0 || res.Energy.DefaultJoules.Total() <= 0 || !strings.Contains(out.String(), "Energy for the same work") ||
		len(res.Energy.TeleschedSeconds) != 2 || !strings.Contains(out.String(), "Finite pods' completion") {
		t.Errorf("no energy comparison: telesched %+v (finite pods %v), default %+v", res.Energy.TeleschedJoules, res.Energy.TeleschedSeconds, res.Energy.DefaultJoules)
	}

	// The oracles placed every pod, no dearer than telesched's placement,
	// which meets the same constraints (the checks above: no node past
	// its limit - margin, no rack over its budget); and the report shows
	// the captured share and the learned marginal watts' error.
	for name, o := range map[string]sandbox.OracleReport{"oracle": res.Energy.Oracle, "oracle, CPU pods off GPU nodes": res.Energy.OracleOffGPU} {
		if len(o.Unplaced) > 0 || !(o.Joules.Total() > 0) || !(o.CPUJoules > 0) {
			t.Errorf("%s: %+v", name, o)
			continue
		}
		// Only the oracle under telesched's own constraints bounds
		// telesched's energy: the one that keeps CPU pods off GPU nodes
		// has a constraint telesched does not (TopologyFit only scores
		// against it), and may be dearer. 3.6 kJ: a watt over the hour.
		// A job the rack's budget kept pending ran after another ended:
		// the oracles then queue jobs too (oracle.Options.Queue), but their
		// model still holds every pod's CPUs and GPUs at once, so the CPUs
		// a queued job leaves free until it starts are not the oracle's
		// to use, and telesched may spend less (by 27.6 kJ in one run:
		// CPU pods on the H100 host beside one job at a time).
		tj := res.Energy.TeleschedJoules
		queued := false
		for _, p := range res.Placements {
			queued = queued || p.Queued
		}
		if o.Queue != queued {
			t.Errorf("%s: queue %v, want %v: the oracles queue where the run queued a job", name, o.Queue, queued)
		}
		dearer := name == "oracle" && !queued && (o.Joules.Total() > tj.Total()+3600 || o.CPUJoules > tj.CPU+3600)
		if dearer || o.Joules.Total() < o.LowerBound-3600 {
			t.Errorf("%s: all %.0f J (bound %.0f J), CPU pods %.0f J; telesched all %.0f J, CPU pods %.0f J",
				name, o.Joules.Total(), o.LowerBound, o.CPUJoules, tj.Total(), tj.CPU)
		}
	}
	if res.Energy.Marginal.NAll < 40 || !strings.Contains(out.String(), "SHARE") || !strings.Contains(out.String(), "median absolute error") {
		t.Errorf("learned vs true marginal watts over %d placements; the report:\n%s", res.Energy.Marginal.NAll, out.String())
	}

	// The pod that would take the cool cpu-efficient past its limit - margin
	// once it settles was refused with the prediction's numbers, when the
	// node had a thermal model by then (the sandbox waits a minute for one;
	// without one a node is judged on its temperature now). The model
	// follows the sensor closest to its limit: the package, or a core that
	// reads the same (the simulated cores 0, 3 and 6 do).
	aheadReason := regexp.MustCompile(`predicted steady temperature of coretemp/(Package id 0|Core \d+) with the pod [\d.]+°C >= limit 100.0°C - margin 5.0°C: [\d.]+°C \+ [\d.]+°C/W x \d+W`)
	if msgs := strings.Join(res.Rejections["too-hot-later"], "\n"); !noModel && (!res.Ahead.Refused || !aheadReason.MatchString(msgs)) {
		t.Errorf("the heat-ahead pod was not refused on its predicted temperature (ran: %v): %q", res.Ahead.Ran, msgs)
	}

	// No pod went where the node, with its pods, settles within the margin
	// of its limit: counted on the simulation's own physics, not the
	// agent's model.
	if len(res.Ahead.PredictedHotPlacements) > 0 {
		t.Errorf("pods placed where the node settles past its limit - margin: %v", res.Ahead.PredictedHotPlacements)
	}
	for name := range map[string]bool{"cpu-efficient": true, "gpu-a100x8": true, res.Heat.Node: true} {
		if res.PeakCelsius[name] <= 0 {
			t.Errorf("no peak temperature for %s: %v", name, res.PeakCelsius)
		}
	}

	// Two racks with budgets: neither exceeded over the run, the GPU rack
	// brought near its budget (90 % in the runs of docs/benchmarks.md);
	// the PowerBudget table as kubectl prints it, with the numbers.
	if len(res.Racks) != 2 {
		t.Fatalf("racks %+v, want rack-cpu and rack-gpu", res.Racks)
	}
	for _, r := range res.Racks {
		t.Logf("%s: peak %.0f W of %d W (limit %d W); telesched's placement %.0f W, the default profile's %.0f W",
			r.Budget, r.PeakWatts, r.BudgetWatts, r.BudgetWatts-r.ReserveWatts, r.TeleschedWatts, r.DefaultWatts)
		if r.PeakWatts <= 0 || r.PeakWatts > float64(r.BudgetWatts) {
			t.Errorf("%s: peak %.0f W, budget %d W", r.Budget, r.PeakWatts, r.BudgetWatts)
		}
		if r.Budget == "rack-gpu" && r.PeakWatts < 0.8*float64(r.BudgetWatts) {
			t.Errorf("rack-gpu peaked at %.0f W of %d W: not near its budget", r.PeakWatts, r.BudgetWatts)
		}
	}
	if len(res.BudgetTables) < 2 {
		t.Fatalf("%d PowerBudget tables printed, want 2", len(res.BudgetTables))
	}
	for _, table := range res.BudgetTables {
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME BUDGET USED RESERVED HEADROOM NODES AGE" {
			t.Errorf("PowerBudget table:\n%s", table)
			continue
		}
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) != 7 {
				t.Errorf("PowerBudget row %q: want every column filled", l)
			}
		}
	}

	// The table as kubectl prints it: simulated rows with temperatures,
	// watts and GPUs; the real host's row honest about what it lacks.
	if len(res.Tables) == 0 {
		t.Fatal("no NodeTelemetry table printed")
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.Tables[len(res.Tables)-1]), "\n") {
		f := strings.Fields(line)
		rows[f[0]] = f
	}
	for node, gpus := range map[string]string{"gpu-a100x8": "8/8", "gpu-h100x8": "8/8", "cpu-efficient": "n/a"} {
		r := rows[node]
		if len(r) != 7 || !strings.HasSuffix(r[3], "°C") || !strings.HasSuffix(r[4], "W") || r[5] != gpus {
			t.Errorf("row %s = %v, want a temperature, watts and GPUS %s", node, r, gpus)
		}
	}
	host := rows[res.RealHost]
	if len(host) != 7 {
		t.Fatalf("real host row = %v", host)
	}
	// The agent says why: its thermal and power sources' reasons.
	if !hasSensors() && (host[3] != "NoSensors" || host[4] != "NoPowerMeter") {
		t.Errorf("real host row %v: this machine has no thermal sensors or power meter, want TEMP NoSensors and POWER NoPowerMeter", host)
	}
}

// hasSensors reports whether this machine exposes temperatures or RAPL.
func hasSensors() bool {
	for _, glob := range []string{"/sys/class/thermal/thermal_zone*/temp", "/sys/class/hwmon/hwmon*/temp*_input", "/sys/class/powercap/intel-rapl:*/energy_uj"} {
		if m, _ := filepath.Glob(glob); len(m) > 0 {
			return true
		}
	}
	return false
}

// TestSandboxBudgetRefusal: on a fleet whose GPU rack's budget cannot
// hold even one training pod, the run ends with a report naming the
// refused pods and their budget's reason, not a timeout; the other pods
// are placed, and the phases the fleet cannot have are skipped, saying
// why.
func TestSandboxBudgetRefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole sandbox; skipped in -short mode")
	}
	fleet, err := sandbox.ReadFleet("testdata/gpu-rack-too-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := sandbox.Run(ctx, sandbox.Options{Dir: t.TempDir(), Out: &out, Fleet: fleet, Descheduler: sandbox.DeschedulerSkip})
	t.Logf("sandbox output:\n%s", out.String())
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	var refused []string
	for _, r := range res.Refused {
		refused = append(refused, r.Pod)
		if len(r.Reasons) == 0 || !strings.HasPrefix(r.Reasons[0], "PowerBudget rack-gpu: measured ") {
			t.Errorf("%s refused for %q, want rack-gpu's numbers", r.Pod, r.Reasons)
		}
	}
	if diff := cmp.Diff([]string{"train-0", "train-1"}, refused); diff != "" {
		t.Errorf("refused pods (-want +got):\n%s", diff)
	}
	if !strings.Contains(out.String(), "Refused by the racks' power budgets (2 pods") {
		t.Errorf("the report does not name the refused pods")
	}
	if len(res.Placements) != 40 {
		t.Errorf("%d pods placed, want the 40 CPU pods", len(res.Placements))
	}
	// Under the same budget no placement of the training pods exists:
	// the oracle proves it, and compares the pods telesched placed.
	if !res.Energy.WorkloadInfeasible {
		t.Error("the oracle did not prove that no placement of the whole workload fits the budgets")
	}
	if len(res.Energy.Oracle.Unplaced) > 0 || len(res.Energy.Oracle.Placements) != 40 || !strings.Contains(out.String(), "over the 40 pods telesched placed") {
		t.Errorf("the oracle of the 40 pods telesched placed: %+v", res.Energy.Oracle)
	}
	if diff := cmp.Diff([]string{"baseline", "web", "burst", "gpu"}, res.Phases); diff != "" {
		t.Errorf("phases that ran (-want +got):\n%s", diff)
	}
	for _, ph := range []string{"heat-ahead", "heat", "cool"} {
		if res.Skipped[ph] == "" {
			t.Errorf("phase %s neither ran nor says why it was skipped: %v", ph, res.Skipped)
		}
	}
}
