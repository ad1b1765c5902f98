// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/deploy/crds"
	"github.com/telesched/telesched/test/fixtures"
)

// TestBoundsMatchCRD walks the committed CRD's status schema and fails for
// any maxItems, maxLength, maximum or minimum that Fit does not enforce
// with the same limit, and for any bound Fit enforces that the API no
// longer has.
func TestBoundsMatchCRD(t *testing.T) {
	list, err := crds.Load()
	if err != nil {
		t.Fatal(err)
	}
	var schema *apiextensionsv1.JSONSchemaProps
	for _, crd := range list {
		if crd.Spec.Names.Kind == "NodeTelemetry" {
			for _, v := range crd.Spec.Versions {
				if v.Name == telemetryv1alpha1.SchemeGroupVersion.Version {
					s := v.Schema.OpenAPIV3Schema.Properties["status"]
					schema = &s
				}
			}
		}
	}
	if schema == nil {
		t.Fatal("no NodeTelemetry v1alpha1 status schema in deploy/crds")
	}
	var inCRD []string
	var walk func(s *apiextensionsv1.JSONSchemaProps, path string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, path string) {
		add := func(k boundKind, v int64) { inCRD = append(inCRD, fmt.Sprintf("%s %s %d", path, k, v)) }
		if s.MaxItems != nil {
			add(maxItems, *s.MaxItems)
		}
		if s.MaxLength != nil {
			add(maxLength, *s.MaxLength)
		}
		if s.Maximum != nil {
			add(maximum, int64(*s.Maximum))
		}
		if s.Minimum != nil {
			add(minimum, int64(*s.Minimum))
		}
		for name, p := range s.Properties {
			if path == "" && name == "calibration" {
				continue // the scheduler's field: the agent never writes it
			}
			walk(&p, strings.TrimPrefix(path+"."+name, "."))
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, path+"[]")
		}
	}
	walk(schema, "")
	var inAgent []string
	for _, b := range apiBounds {
		inAgent = append(inAgent, fmt.Sprintf("%s %s %d", b.path, b.kind, b.limit))
	}
	slices.Sort(inCRD)
	slices.Sort(inAgent)
	for _, b := range inCRD {
		if !slices.Contains(inAgent, b) {
			t.Errorf("the CRD has %q; the agent does not enforce it (add it to apiBounds)", b)
		}
	}
	for _, b := range inAgent {
		if !slices.Contains(inCRD, b) {
			t.Errorf("the agent enforces %q; the CRD has no such bound", b)
		}
	}
	// Every bound can be followed through the Go types (fitPath panics
	// on a path that names no field).
	full := fixtures.FullStatus(time.Now(), 2, 8)
	Fit(&full)
}

// Defect 4: one out-of-bounds field made the API server refuse the whole
// status, forever. Fit brings each within the API and says so in the
// section's source.
func TestFit(t *testing.T) {
	st := fixtures.FullStatus(time.Now(), 2, 8)
	for i := 8; i < 17; i++ { // 17 GPUs
		g := st.GPUs[0]
		g.Index, g.UUID = int32(i), fmt.Sprintf("GPU-%02d", i)
		st.GPUs = append(st.GPUs, g)
	}
	var cpus []string // interleaved numbering: 0,2,4,... 1100+ characters
	for cpu := 0; cpu < 1024; cpu += 2 {
		cpus = append(cpus, fmt.Sprint(cpu))
	}
	st.NUMA[0].CPUs = strings.Join(cpus, ",")
	st.Conditions[1].Message = strings.Repeat("x", 40_000)
	st.IntervalSeconds = 7200

	adj := Fit(&st)
	if len(st.GPUs) != 16 || st.GPUs[15].Index != 15 {
		t.Errorf("%d GPUs published, last %d; want 16, GPUs 0..15", len(st.GPUs), st.GPUs[len(st.GPUs)-1].Index)
	}
	if st.NUMA[0].CPUs != "" || st.NUMA[0].LogicalCores == 0 {
		t.Errorf("NUMA node 0: cpus %q (%d cores); want an empty list, the core count kept", st.NUMA[0].CPUs, st.NUMA[0].LogicalCores)
	}
	if n := len(st.Conditions[1].Message); n > 32768 {
		t.Errorf("condition message %d bytes, want at most 32768", n)
	}
	if st.IntervalSeconds != 3600 {
		t.Errorf("intervalSeconds = %d, want clamped to 3600", st.IntervalSeconds)
	}
	var msgs []string
	for _, a := range adj {
		msgs = append(msgs, fmt.Sprintf("%s: %s", a.Source, a.Message))
	}
	t.Logf("adjustments:\n%s", strings.Join(msgs, "\n"))
	if len(adj) != 4 {
		t.Errorf("%d adjustments, want 4 (gpus, numa cpus, condition message, intervalSeconds)", len(adj))
	}
	for _, s := range st.Sources {
		switch s.Name {
		case telemetryv1alpha1.SourceGPU:
			if s.State != telemetryv1alpha1.SourceAvailable || !strings.Contains(s.Message, "gpus: 17 items, the API takes 16") {
				t.Errorf("gpu source = %+v, want Available saying 17 GPUs were cut to 16", s)
			}
		case telemetryv1alpha1.SourceNUMA:
			if !strings.Contains(s.Message, "numa[0].cpus") {
				t.Errorf("numa source = %+v, want it to name numa[0].cpus", s)
			}
		}
	}
	// Within bounds, nothing changes.
	ok := fixtures.FullStatus(time.Now(), 2, 8)
	if adj := Fit(&ok); len(adj) != 0 {
		t.Errorf("Fit changed a status within bounds: %+v", adj)
	}
}

// BenchmarkFit is the cost Fit adds to every sample.
func BenchmarkFit(b *testing.B) {
	st := fixtures.FullStatus(time.Now(), 2, 8)
	b.ReportAllocs()
	for b.Loop() {
		Fit(&st)
	}
}
