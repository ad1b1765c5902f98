// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeRound writes one round's data-items files, one per profile, as
// scheduler_perf names and fills them.
func writeRound(t *testing.T, dir string, throughput map[string]float64, p99 map[string]float64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for profile, tp := range throughput {
		name := "BenchmarkPerfScheduling/misc/" + profile + "/SchedulingBasic/500Nodes/namespace-2"
		data := fmt.Sprintf(`{"version":"v1","dataItems":[
{"data":{"Average":%v,"Perc50":1},"unit":"pods/s","labels":{"Metric":"SchedulingThroughput","Name":%q}},
{"data":{"Perc99":%v},"unit":"ms","labels":{"Metric":"scheduler_scheduling_attempt_duration_seconds","Name":%q,"result":"scheduled"}},
{"data":{"Perc99":999},"unit":"ms","labels":{"Metric":"scheduler_scheduling_attempt_duration_seconds","Name":%q,"result":"unschedulable"}}]}`,
			tp, name, p99[profile], name, name)
		file := filepath.Join(dir, "BenchmarkPerfScheduling_misc_"+profile+"_benchmark_misc_"+profile+"_2026-11-27T00:00:00Z.json")
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// reportLines loads the rounds under dir and returns report's lines.
func reportLines(t *testing.T, dir string) []string {
	t.Helper()
	rounds, err := load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report(&out, rounds); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

func TestReportPrintsMedianRatioOfRounds(t *testing.T) {
	dir := t.TempDir()
	// ratios: 80/100 = 0.80, 90/100 = 0.90, 100/80 = 1.25: median 0.90
	writeRound(t, filepath.Join(dir, "r1"), map[string]float64{"default": 100, "telesched": 80}, map[string]float64{"default": 10, "telesched": 12})
	writeRound(t, filepath.Join(dir, "r2"), map[string]float64{"default": 100, "telesched": 90}, map[string]float64{"default": 11, "telesched": 13})
	writeRound(t, filepath.Join(dir, "r3"), map[string]float64{"default": 80, "telesched": 100}, map[string]float64{"default": 12, "telesched": 14})
	lines := reportLines(t, dir)
	var rows []string
	for _, l := range lines[1:4] {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"misc/SchedulingBasic/500Nodes/namespace-2 1 100.0 80.0 0.80 10.0 12.0",
		"misc/SchedulingBasic/500Nodes/namespace-2 2 100.0 90.0 0.90 11.0 13.0",
		"misc/SchedulingBasic/500Nodes/namespace-2 3 80.0 100.0 1.25 12.0 14.0",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rounds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("misc/SchedulingBasic/500Nodes/namespace-2: ratio 0.90", lines[len(lines)-1]); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestReportNotesWorkloadsWithoutThroughputOfBothProfiles(t *testing.T) {
	dir := t.TempDir()
	writeRound(t, dir, map[string]float64{"default": 100}, map[string]float64{"default": 10})
	lines := reportLines(t, dir)
	want := "no workload has a throughput with both profiles: SchedulingThroughput needs a measured op that runs for a second or more"
	if diff := cmp.Diff(want, lines[len(lines)-1]); diff != "" {
		t.Errorf("last line (-want +got):\n%s", diff)
	}
}

func TestLoadFailsWithoutDataItems(t *testing.T) {
	if _, err := load([]string{t.TempDir()}); err == nil {
		t.Error("load of an empty directory: no error, want one")
	}
}
