// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package speed says how much work a node's CPU cores and GPUs do per
// second, relative to the references of docs/energy-models.md ("Speed"),
// and where each figure comes from: the operator's table or override
// first, then the table telesched ships (table.yaml, every row citing a
// public benchmark result), else the reference itself, stated as unknown.
//
// The scheduler judges a placement's energy by it: a pod's requests are
// sized on the reference, so on a node k times faster the same work takes
// 1/k of the CPU (or GPU) time, and its joules are the watts the node adds
// for it times that time.
package speed

import (
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// Reference is the speed of the reference CPU core and GPU: 1000
// thousandths.
const Reference = 1000

// MaxMilli bounds a figure, as the API does (100 times the reference).
const MaxMilli = 100_000

// MaxBasis is the longest basis the API takes; MaxGPUModels the most GPU
// models it lists (status.speed.gpus).
const (
	MaxBasis     = 64
	MaxGPUModels = 2
)

// Table is a speed table: rows keyed by a part of the CPU model name
// (/proc/cpuinfo's "model name") and of the GPU product name (NVML's, or
// GPU Feature Discovery's nvidia.com/gpu.product).
type Table struct {
	CPUs []Row `json:"cpus,omitempty"`
	GPUs []Row `json:"gpus,omitempty"`
}

// Row is one entry of a Table.
type Row struct {
	// Match is found in the model name, case and spaces aside; the longest
	// match of a table wins, so "A100-SXM4-80GB" beats "A100".
	Match string `json:"match"`
	// Milli is the work per second in thousandths of the reference's: per
	// logical CPU at full load for a CPU row, per whole GPU for a GPU row.
	Milli int32 `json:"milli"`
	// Basis is where the figure comes from (a benchmark result's id and
	// what was divided by what), published beside it.
	Basis string `json:"basis"`
	// Source is the public source of Basis (a URL); not published.
	Source string `json:"source,omitempty"`
}

//go:embed table.yaml
var shippedYAML []byte

// Shipped is the table telesched ships (table.yaml), parsed once; its
// rows are shared, not to be changed.
var Shipped = sync.OnceValue(func() Table {
	t, err := Parse(shippedYAML)
	if err != nil {
		panic("agent/speed: the shipped table.yaml is invalid: " + err.Error())
	}
	return t
})

// Parse reads a table from YAML (or JSON), strictly: an unknown field, a
// row without a match, or a figure outside 1 to MaxMilli is an error that
// names the row (the first bad one, cpus before gpus).
func Parse(data []byte) (Table, error) {
	var t Table
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return Table{}, err
	}
	for _, list := range []struct {
		kind string
		rows []Row
	}{{"cpus", t.CPUs}, {"gpus", t.GPUs}} {
		kind := list.kind
		for i, r := range list.rows {
			if norm(r.Match) == "" {
				return Table{}, fmt.Errorf("%s[%d]: match is empty", kind, i)
			}
			if r.Milli < 1 || r.Milli > MaxMilli {
				return Table{}, fmt.Errorf("%s[%d] (%q): milli %d is outside 1 to %d", kind, i, r.Match, r.Milli, MaxMilli)
			}
			if len(r.Basis) > MaxBasis {
				return Table{}, fmt.Errorf("%s[%d] (%q): basis is %d characters, the API allows %d", kind, i, r.Match, len(r.Basis), MaxBasis)
			}
		}
	}
	return t, nil
}

// Load reads an operator's table from path.
func Load(path string) (Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Table{}, err
	}
	t, err := Parse(data)
	if err != nil {
		return Table{}, fmt.Errorf("speed table %s: %w", path, err)
	}
	return t, nil
}

// norm folds case and drops spaces, dashes and "(R)"/"(TM)" marks, so
// "Intel(R) Xeon(R) Platinum 8180 CPU" and "xeon platinum 8180" meet, and
// NVML's "NVIDIA A100-SXM4-80GB" and GFD's "NVIDIA-A100-SXM4-80GB" too.
func norm(s string) string {
	s = strings.ToLower(s)
	s = strings.NewReplacer("(r)", "", "(tm)", "", " ", "", "-", "", "_", "").Replace(s)
	return s
}

// lookup is the row of rows whose match is the longest found in model.
func lookup(rows []Row, model string) (Row, bool) {
	m := norm(model)
	var best Row
	found := false
	for _, r := range rows {
		k := norm(r.Match)
		if k != "" && strings.Contains(m, k) && (!found || len(k) > len(norm(best.Match))) {
			best, found = r, true
		}
	}
	return best, found
}

// NodeLabel is the Node label by which an operator gives one node's CPU
// core speed, in thousandths of the reference's, above
// --cpu-core-speed-milli and every table. The agent reads it at start.
const NodeLabel = "telesched.io/cpu-core-speed-milli"

// FromNodeLabel is the CPU core speed the Node's labels give (NodeLabel):
// ok false when the label is absent, an error when it is not a whole
// number from 1 to MaxMilli.
func FromNodeLabel(labels map[string]string) (milli int32, ok bool, err error) {
	v, ok := labels[NodeLabel]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > MaxMilli {
		return 0, false, fmt.Errorf("the Node label %s=%q: want a whole number from 1 to %d", NodeLabel, v, MaxMilli)
	}
	return int32(n), true, nil
}

// Resolver gives a node's speeds from the operator's table and override,
// then the shipped table.
type Resolver struct {
	// Operator is the operator's table (--speed-table); empty: none.
	Operator Table
	// CPUCoreMilli, when above 0, is the operator's figure for this
	// node's CPU cores (the Node label NodeLabel, or
	// --cpu-core-speed-milli), above every table; CPUCoreBasis says
	// which ("--cpu-core-speed-milli" when empty).
	CPUCoreMilli int32
	CPUCoreBasis string
	// Shipped is the table telesched ships.
	Shipped Table
}

// CPU is the speed of a logical CPU of the model named.
func (r Resolver) CPU(model string) (milli int32, source telemetryv1alpha1.SpeedSource, basis string) {
	if r.CPUCoreMilli > 0 {
		return r.CPUCoreMilli, telemetryv1alpha1.SpeedSourceOperator, clip(r.CPUCoreBasis, "--cpu-core-speed-milli")
	}
	if row, ok := lookup(r.Operator.CPUs, model); ok {
		return row.Milli, telemetryv1alpha1.SpeedSourceOperator, clip(row.Basis, "operator table: "+row.Match)
	}
	if row, ok := lookup(r.Shipped.CPUs, model); ok {
		return row.Milli, telemetryv1alpha1.SpeedSourceTable, clip(row.Basis, row.Match)
	}
	return Reference, telemetryv1alpha1.SpeedSourceReference, unknown("CPU", model)
}

// GPU is the speed of a whole GPU of the model named.
func (r Resolver) GPU(model string) (milli int32, source telemetryv1alpha1.SpeedSource, basis string) {
	if row, ok := lookup(r.Operator.GPUs, model); ok {
		return row.Milli, telemetryv1alpha1.SpeedSourceOperator, clip(row.Basis, "operator table: "+row.Match)
	}
	if row, ok := lookup(r.Shipped.GPUs, model); ok {
		return row.Milli, telemetryv1alpha1.SpeedSourceTable, clip(row.Basis, row.Match)
	}
	return Reference, telemetryv1alpha1.SpeedSourceReference, unknown("GPU", model)
}

func unknown(kind, model string) string {
	if strings.TrimSpace(model) == "" {
		return clip("", "no "+kind+" model name to look up")
	}
	return clip("", "no table row for "+kind+" "+model)
}

// clip is basis, or def when basis is empty, cut to the API's MaxBasis
// bytes (at a rune boundary).
func clip(basis, def string) string {
	if basis == "" {
		basis = def
	}
	if len(basis) > MaxBasis {
		cut := MaxBasis - 3
		for cut > 0 && !utf8.RuneStart(basis[cut]) {
			cut--
		}
		basis = basis[:cut] + "..."
	}
	return basis
}

// Status is the node's speed section: its CPU model's figure and one for
// each distinct GPU model, in the order the GPUs list them (at most the
// API's MaxGPUModels; a GPU of another model is judged as the reference).
func (r Resolver) Status(cpuModel string, gpus []telemetryv1alpha1.GPUStatus) *telemetryv1alpha1.SpeedStatus {
	st := &telemetryv1alpha1.SpeedStatus{}
	st.CPUCoreMilli, st.CPUSource, st.CPUBasis = r.CPU(cpuModel)
	for _, g := range gpus {
		if g.Model == "" || len(st.GPUs) == MaxGPUModels || hasModel(st.GPUs, g.Model) {
			continue
		}
		s := telemetryv1alpha1.GPUSpeed{Model: g.Model}
		s.Milli, s.Source, s.Basis = r.GPU(g.Model)
		st.GPUs = append(st.GPUs, s)
	}
	return st
}

func hasModel(gs []telemetryv1alpha1.GPUSpeed, model string) bool {
	for _, g := range gs {
		if g.Model == model {
			return true
		}
	}
	return false
}

// Summary is the status's speed for `kubectl get nt -o wide`, at most
// 40 characters: "cpu 1.31x table, gpu 2.06x table"; a reference
// figure reads "ref?", and GPU models past what fits "+".
func Summary(st *telemetryv1alpha1.SpeedStatus) string {
	if st == nil {
		return ""
	}
	b := "cpu " + figure(st.CPUCoreMilli, st.CPUSource)
	for _, g := range st.GPUs {
		next := ", gpu " + figure(g.Milli, g.Source)
		if len(b)+len(next) > 38 {
			return b + ",+"
		}
		b += next
	}
	return b
}

func figure(milli int32, src telemetryv1alpha1.SpeedSource) string {
	if src == telemetryv1alpha1.SpeedSourceReference {
		return "ref?"
	}
	return fmt.Sprintf("%.2fx %s", float64(milli)/1000, src)
}
