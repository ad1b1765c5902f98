// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"

	v1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// observeFrom stores a sample of node name, 475 W from sources.
func (f *fixture) observeFrom(name string, sources ...v1alpha1.PowerSource) {
	st := status(f.t, 5, 47, 475, true)
	st.Power.Sources = sources
	f.cache.Set(telemetry.FromStatus(name, st))
}

// A budget states which sources its measured watts add up, and whether
// they compare with a feed's limit.
func TestBudgetStatesPowerSources(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources [][]v1alpha1.PowerSource // n1, n2, n3
		want    []v1alpha1.PowerSource
		status  metav1.ConditionStatus
		reason  string
		message string // substring
	}{
		{"one meter", [][]v1alpha1.PowerSource{{"acpi"}, {"acpi"}, {"acpi"}}, []v1alpha1.PowerSource{"acpi"},
			metav1.ConditionTrue, ReasonOneSource, "nodes by their watts' sources: acpi 3"},
		// NVML beside a node meter is the same kind of meter
		{"one meter, some with GPUs", [][]v1alpha1.PowerSource{{"hwmon", "nvml"}, {"hwmon"}, {"hwmon"}}, []v1alpha1.PowerSource{"hwmon", "nvml"},
			metav1.ConditionTrue, ReasonOneSource, "hwmon 2, hwmon+nvml 1"},
		{"mixed meters", [][]v1alpha1.PowerSource{{"acpi"}, {"hwmon"}, {"hwmon"}}, []v1alpha1.PowerSource{"acpi", "hwmon"},
			metav1.ConditionFalse, ReasonMixedSources, "acpi 1, hwmon 2"},
		{"RAPL on one node", [][]v1alpha1.PowerSource{{"rapl", "nvml"}, {"acpi"}, {"acpi"}}, []v1alpha1.PowerSource{"rapl", "acpi", "nvml"},
			metav1.ConditionFalse, ReasonPartialMeters, "1 of 3 nodes count part of what they draw (rapl: CPU packages and DRAM only"},
		{"GPUs alone", [][]v1alpha1.PowerSource{{"nvml"}, {"acpi"}, {"acpi"}}, []v1alpha1.PowerSource{"acpi", "nvml"},
			metav1.ConditionFalse, ReasonPartialMeters, "1 of 3 nodes"},
		{"no watts", [][]v1alpha1.PowerSource{nil, nil, nil}, nil, metav1.ConditionUnknown, ReasonNoMeasuredWatts, "no node's own watts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
			for i, n := range []string{"n1", "n2", "n3"} {
				f.node(n, "rack", "a")
				if tc.sources[i] != nil {
					f.observeFrom(n, tc.sources[i]...)
				}
			}
			check := func(when string) {
				t.Helper()
				d := rackA(t, f)
				st := StatusOf(&d, f.t)
				if diff := cmp.Diff(tc.want, st.PowerSources); diff != "" {
					t.Errorf("%s: status.powerSources (-want +got):\n%s", when, diff)
				}
				c := meta.FindStatusCondition(st.Conditions, ConditionPowerSourcesComparable)
				if c == nil || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
					t.Errorf("%s: condition %+v; want %s/%s with %q", when, c, tc.status, tc.reason, tc.message)
				}
			}
			check("built")
			// A placement derives the next snapshot from this one: the
			// sources must move with the node, not be counted twice.
			placeRunning(f, "n1", "p", 1000)
			check("derived")
		})
	}
}

// A node whose sample lacks watts counts the sources of its last ones
// while the rack counts those.
func TestHeldWattsKeepTheirSources(t *testing.T) {
	f := newFixture()
	f.budget(t, "rack-a", "rack", "a", 2000, nil, nil)
	f.node("n1", "rack", "a")
	f.observeFrom("n1", "rapl")
	f.t = f.t.Add(5 * time.Second)
	st := status(f.t, 5, 47, 0, true)
	st.Power = nil
	f.cache.Set(telemetry.FromStatus("n1", st))
	d := rackA(t, f)
	if got := d.PowerSources().String(); got != "rapl" {
		t.Errorf("n1's watts held: sources %q, want rapl", got)
	}
}

func TestSourceMetrics(t *testing.T) {
	RegisterMetrics()
	f := newFixture()
	f.budget(t, "rack-sources", "rack", "s", 2000, nil, nil)
	for _, n := range []string{"n1", "n2"} {
		f.node(n, "rack", "s")
	}
	f.observeFrom("n1", "rapl", "nvml")
	f.observeFrom("n2", "acpi")
	f.d.ExportMetrics(f.t, maxAge)
	for _, tc := range []struct {
		g      float64
		labels []string
		vec    string
	}{
		{1, []string{"rack-sources", "rapl+nvml"}, "source_nodes"},
		{1, []string{"rack-sources", "acpi"}, "source_nodes"},
		{1, []string{"rack-sources", ReasonPartialMeters}, "sources_warning"},
	} {
		vec := sourceNodes
		if tc.vec == "sources_warning" {
			vec = sourcesWarning
		}
		if got, err := testutil.GetGaugeMetricValue(vec.WithLabelValues(tc.labels...)); err != nil || got != tc.g {
			t.Errorf("telesched_power_budget_%s%v = %v (%v), want %v", tc.vec, tc.labels, got, err, tc.g)
		}
	}
	// n1 on ACPI too: the warning's series goes.
	f.t = f.t.Add(5 * time.Second)
	f.observeFrom("n1", "acpi")
	f.observeFrom("n2", "acpi")
	f.d.ExportMetrics(f.t, maxAge)
	if got, _ := testutil.GetGaugeMetricValue(sourceNodes.WithLabelValues("rack-sources", "acpi")); got != 2 {
		t.Errorf("telesched_power_budget_source_nodes{acpi} = %v, want 2", got)
	}
	if sourcesWarning.DeleteLabelValues("rack-sources", ReasonPartialMeters) {
		t.Errorf("telesched_power_budget_sources_warning{rack-sources,PartialMeters} still exported after every node is on ACPI")
	}
}

// The writer records one Event per change of PowerSourcesComparable.
func TestSourcesEvents(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) v1alpha1.PowerBudgetStatus {
		return v1alpha1.PowerBudgetStatus{Conditions: []metav1.Condition{{Type: ConditionPowerSourcesComparable, Status: status, Reason: reason, Message: "m"}}}
	}
	for _, tc := range []struct {
		name     string
		old, cur v1alpha1.PowerBudgetStatus
		want     string // "" for no Event
	}{
		{"turns False", cond(metav1.ConditionTrue, ReasonOneSource), cond(metav1.ConditionFalse, ReasonPartialMeters), "Warning PartialMeters m"},
		{"first status, False", v1alpha1.PowerBudgetStatus{}, cond(metav1.ConditionFalse, ReasonMixedSources), "Warning MixedSources m"},
		{"changes reason", cond(metav1.ConditionFalse, ReasonMixedSources), cond(metav1.ConditionFalse, ReasonPartialMeters), "Warning PartialMeters m"},
		{"stays False", cond(metav1.ConditionFalse, ReasonPartialMeters), cond(metav1.ConditionFalse, ReasonPartialMeters), ""},
		{"turns True", cond(metav1.ConditionFalse, ReasonPartialMeters), cond(metav1.ConditionTrue, ReasonOneSource), "Normal PowerSourcesComparable m"},
		{"first status, True", v1alpha1.PowerBudgetStatus{}, cond(metav1.ConditionTrue, ReasonOneSource), ""},
		{"Unknown", cond(metav1.ConditionFalse, ReasonPartialMeters), cond(metav1.ConditionUnknown, ReasonNoMeasuredWatts), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			w := &statusWriter{recorder: rec}
			w.recordSources(&Domain{Name: "rack-a"}, tc.old, tc.cur)
			var got string
			select {
			case got = <-rec.Events:
			default:
			}
			if got != tc.want {
				t.Errorf("Event %q, want %q", got, tc.want)
			}
		})
	}
}
