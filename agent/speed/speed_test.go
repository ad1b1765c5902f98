// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package speed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// TestShippedTableRows checks the shipped table against the figures it
// cites: ssj_ops at 100 % over hardware threads, over the reference's
// 5,731,237 / 112 (SPEC's SPECpower_ssj2008 results export), and the
// model names as real /proc/cpuinfo dumps and NVML print them.
func TestShippedTableRows(t *testing.T) {
	r := Resolver{Shipped: Shipped()}
	ref := 5731237.0 / 112
	for _, c := range []struct {
		cpuinfo       string
		ssjOps, thr   float64
		wantSrc       telemetryv1alpha1.SpeedSource
		wantReference bool
	}{
		{cpuinfo: "Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz", ssjOps: 5731237, thr: 112},
		{cpuinfo: "Intel(R) Xeon(R) CPU E5-4669 v4 @ 2.20GHz", ssjOps: 7070522, thr: 176},
		{cpuinfo: "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz", ssjOps: 1237842, thr: 32},
		{cpuinfo: "Intel(R) Xeon(R) CPU           X5670  @ 2.93GHz", ssjOps: 912178, thr: 24},
		{cpuinfo: "Intel(R) Xeon(R) CPU           E5440  @ 2.83GHz", ssjOps: 303846, thr: 8},
		{cpuinfo: "Intel(R) Xeon(R) CPU           E5345  @ 2.33GHz", ssjOps: 235525, thr: 8},
		{cpuinfo: "Intel(R) Xeon(R) CPU            5160  @ 3.00GHz", ssjOps: 164569, thr: 4},
		// Not E5-2670 v1's row.
		{cpuinfo: "Intel(R) Xeon(R) CPU E5-2670 v2 @ 2.50GHz", wantReference: true},
	} {
		milli, src, basis := r.CPU(c.cpuinfo)
		if c.wantReference {
			if src != telemetryv1alpha1.SpeedSourceReference || milli != Reference {
				t.Errorf("%q: %d from %s (%s), want the reference, unknown", c.cpuinfo, milli, src, basis)
			}
			continue
		}
		want := int32(c.ssjOps/c.thr/ref*1000 + 0.5)
		if milli != want || src != telemetryv1alpha1.SpeedSourceTable {
			t.Errorf("%q: %d from %s (%s), want %d from the table", c.cpuinfo, milli, src, basis, want)
		}
	}
	for model, want := range map[string]int32{
		"NVIDIA A100-SXM4-80GB": 1000, "NVIDIA A100-SXM4-40GB": 902, "NVIDIA H100 80GB HBM3": 2060, "NVIDIA H200": 2307,
		"NVIDIA H100 NVL": 1427,
		// GPU Feature Discovery's nvidia.com/gpu.product spelling.
		"NVIDIA-H100-80GB-HBM3": 2060, "NVIDIA-H100-NVL": 1427,
	} {
		if milli, src, basis := r.GPU(model); milli != want || src != telemetryv1alpha1.SpeedSourceTable {
			t.Errorf("%q: %d from %s (%s), want %d from the table", model, milli, src, basis, want)
		}
	}
	for _, row := range append(Shipped().CPUs, Shipped().GPUs...) {
		if row.Basis == "" || len(row.Basis) > MaxBasis || !strings.HasPrefix(row.Source, "https://") {
			t.Errorf("row %q cites no source: basis %q, source %q", row.Match, row.Basis, row.Source)
		}
	}
}

// TestUnknownIsTheReference: real machines of the agent's corpus whose
// CPUs no table names publish the reference and say it is unknown.
func TestUnknownIsTheReference(t *testing.T) {
	r := Resolver{Shipped: Shipped()}
	for _, dir := range []string{"amd-epyc-7313-2socket-nps4", "intel-xeon-gold-5218r-rapl"} {
		model := collector.CPUModel(hostfs.New(filepath.Join("..", "testdata", "corpus", dir, "root")))
		if model == "" {
			t.Fatalf("%s: no model name in its /proc/cpuinfo", dir)
		}
		st := r.Status(model, nil)
		if st.CPUCoreMilli != Reference || st.CPUSource != telemetryv1alpha1.SpeedSourceReference || !strings.Contains(st.CPUBasis, model) {
			t.Errorf("%s (%s): %+v, want the reference, unknown, naming the model", dir, model, st)
		}
		if got := Summary(st); got != "cpu ref?" {
			t.Errorf("%s: summary %q, want %q", dir, got, "cpu ref?")
		}
	}
	if st := r.Status("", nil); st.CPUSource != telemetryv1alpha1.SpeedSourceReference || st.CPUBasis != "no CPU model name to look up" {
		t.Errorf("no model name: %+v", st)
	}
}

// TestOperatorFirst: the operator's override, then its table, then the
// shipped table; the longest match of a table wins.
func TestOperatorFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "speeds.yaml")
	if err := os.WriteFile(path, []byte(`
cpus:
- {match: "EPYC", milli: 1100, basis: "our EPYC fleet"}
- {match: "EPYC 7313", milli: 1250, basis: "our own run of our batch job"}
gpus:
- {match: "H100", milli: 2500, basis: "our training job"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	op, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := Resolver{Operator: op, Shipped: Shipped()}
	if m, src, basis := r.CPU("AMD EPYC 7313 16-Core Processor"); m != 1250 || src != telemetryv1alpha1.SpeedSourceOperator || basis != "our own run of our batch job" {
		t.Errorf("EPYC 7313: %d %s %q", m, src, basis)
	}
	if m, src, _ := r.GPU("NVIDIA H100 80GB HBM3"); m != 2500 || src != telemetryv1alpha1.SpeedSourceOperator {
		t.Errorf("H100: %d %s, want the operator's 2500", m, src)
	}
	if m, src, _ := r.CPU("Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz"); m != 1000 || src != telemetryv1alpha1.SpeedSourceTable {
		t.Errorf("8180: %d %s, want the shipped table's", m, src)
	}
	r.CPUCoreMilli = 900
	if m, src, _ := r.CPU("AMD EPYC 7313 16-Core Processor"); m != 900 || src != telemetryv1alpha1.SpeedSourceOperator {
		t.Errorf("override: %d %s", m, src)
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		`cpus: [{match: "", milli: 1000}]`:            "cpus[0]: match is empty",
		`gpus: [{match: "H100", milli: 0}]`:           `gpus[0] ("H100"): milli 0 is outside 1 to 100000`,
		`cpus: [{match: "x", milli: 1000, speed: 1}]`: `unknown field "speed"`,
		// Two bad rows: the first, cpus before gpus, every time.
		"cpus: [{match: \"\", milli: 1000}]\ngpus: [{match: \"H100\", milli: 0}]": "cpus[0]: match is empty",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}

// TestSummaryFits: the printer column's summary stays within the API's
// 40 characters with the widest figures.
func TestSummaryFits(t *testing.T) {
	st := &telemetryv1alpha1.SpeedStatus{CPUCoreMilli: 12345, CPUSource: telemetryv1alpha1.SpeedSourceOperator}
	for _, m := range []string{"a", "b"} {
		st.GPUs = append(st.GPUs, telemetryv1alpha1.GPUSpeed{Model: m, Milli: 23456, Source: telemetryv1alpha1.SpeedSourceOperator})
	}
	if s := Summary(st); len(s) > 40 || s != "cpu 12.35x operator,+" {
		t.Errorf("summary %q (%d characters)", s, len(s))
	}
}

func TestFromNodeLabel(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		milli  int32
		ok     bool
		err    string
	}{
		{labels: nil},
		{labels: map[string]string{"kubernetes.io/hostname": "n"}},
		{labels: map[string]string{NodeLabel: "1210"}, milli: 1210, ok: true},
		{labels: map[string]string{NodeLabel: "100000"}, milli: 100000, ok: true},
		{labels: map[string]string{NodeLabel: "0"}, err: `the Node label telesched.io/cpu-core-speed-milli="0": want a whole number from 1 to 100000`},
		{labels: map[string]string{NodeLabel: "100001"}, err: `"100001": want a whole number`},
		{labels: map[string]string{NodeLabel: "1.2"}, err: `"1.2": want a whole number`},
		{labels: map[string]string{NodeLabel: ""}, err: `"": want a whole number`},
	} {
		milli, ok, err := FromNodeLabel(tc.labels)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one containing %q", tc.labels, err, tc.err)
			}
			continue
		}
		if err != nil || milli != tc.milli || ok != tc.ok {
			t.Errorf("%v: %d, %v, %v; want %d, %v", tc.labels, milli, ok, err, tc.milli, tc.ok)
		}
	}
	r := Resolver{Shipped: Shipped(), CPUCoreMilli: 1210, CPUCoreBasis: "Node label " + NodeLabel}
	if milli, src, basis := r.CPU("Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz"); milli != 1210 || src != telemetryv1alpha1.SpeedSourceOperator || basis != "Node label "+NodeLabel {
		t.Errorf("CPU with the label's figure = %d %s %q, want 1210 operator %q", milli, src, basis, "Node label "+NodeLabel)
	}
}
