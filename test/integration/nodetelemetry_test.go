// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

const fieldManager = "telesched-agent"

var ntResource = telemetryv1alpha1.SchemeGroupVersion.WithResource("nodetelemetries")

type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newClients(t *testing.T) clients {
	t.Helper()
	return clients{
		kube: kubernetes.NewForConfigOrDie(cfg),
		dyn:  dynamic.NewForConfigOrDie(cfg),
	}
}

// createNodeAndTelemetry creates a Node and its NodeTelemetry, owned by it,
// with no status yet, and returns the Node.
func (c clients) createNodeAndTelemetry(ctx context.Context, t *testing.T, name string) *corev1.Node {
	t.Helper()
	node, err := c.kube.CoreV1().Nodes().Create(ctx, fixtures.Node(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node: %v", err)
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(telemetryv1alpha1.SchemeGroupVersion.String())
	obj.SetKind("NodeTelemetry")
	obj.SetName(name)
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}})
	if _, err := c.dyn.Resource(ntResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodeTelemetry: %v", err)
	}
	return node
}

// applyStatus writes status to the named NodeTelemetry by server-side apply
// on the status subresource, as the agent does.
func (c clients) applyStatus(ctx context.Context, name string, status telemetryv1alpha1.NodeTelemetryStatus) (*unstructured.Unstructured, error) {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(),
		"kind":       "NodeTelemetry",
		"metadata":   map[string]any{"name": name},
		"status":     st,
	}}
	return c.dyn.Resource(ntResource).ApplyStatus(ctx, name, obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
}

func (c clients) get(ctx context.Context, t *testing.T, name string) *telemetryv1alpha1.NodeTelemetry {
	t.Helper()
	u, err := c.dyn.Resource(ntResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting NodeTelemetry %s: %v", name, err)
	}
	nt := &telemetryv1alpha1.NodeTelemetry{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, nt, true); err != nil {
		t.Fatalf("decoding NodeTelemetry %s strictly: %v", name, err)
	}
	return nt
}

// TestNodeTelemetryLifecycle creates a Node and its NodeTelemetry, writes a
// fully populated status by server-side apply on the status subresource, and
// reads it back unchanged.
func TestNodeTelemetryLifecycle(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	node := c.createNodeAndTelemetry(ctx, t, "lifecycle-gpu-node")

	want := fixtures.FullStatus(time.Now(), 2, 8)
	if _, err := c.applyStatus(ctx, node.Name, want); err != nil {
		t.Fatalf("applying status: %v", err)
	}
	got := c.get(ctx, t, node.Name)

	// Everything sent comes back: the CRD schema prunes nothing the Go types hold.
	if diff := cmp.Diff(want, got.Status); diff != "" {
		t.Errorf("status after apply (-want +got):\n%s", diff)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	if diff := cmp.Diff(wantOwner, got.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	var statusManagers []string
	for _, mf := range got.ManagedFields {
		if mf.Subresource == "status" {
			statusManagers = append(statusManagers, fmt.Sprintf("%s/%s", mf.Manager, mf.Operation))
		}
	}
	if diff := cmp.Diff([]string{fieldManager + "/Apply"}, statusManagers); diff != "" {
		t.Errorf("managers of the status subresource (-want +got):\n%s", diff)
	}

	// Size as stored, for the record: managed fields are the server's addition.
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	got.ManagedFields = nil
	noMF, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored object with 8 GPUs: %d bytes of JSON, %d without managedFields", len(raw), len(noMF))

	// A second apply by the same manager that drops a section removes it.
	want.Thermal = nil
	if _, err := c.applyStatus(ctx, node.Name, want); err != nil {
		t.Fatalf("applying status without thermal: %v", err)
	}
	if got := c.get(ctx, t, node.Name); got.Status.Thermal != nil {
		t.Errorf("thermal = %+v after an apply without it, want it removed", got.Status.Thermal)
	}
}

// TestNodeTelemetryTable fetches the server-side table, the request
// `kubectl get nt` makes, and checks its columns and rendered cells.
func TestNodeTelemetryTable(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)

	gpu := c.createNodeAndTelemetry(ctx, t, "table-gpu-node")
	gpuStatus := fixtures.FullStatus(time.Now().Add(-15*time.Minute), 2, 8)
	// What the scheduler writes once it has measured pods starting here.
	gpuStatus.Calibration = &telemetryv1alpha1.PowerCalibration{MeasuredPercentOfPredicted: 112, Measurements: 4, UpdateTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	if _, err := c.applyStatus(ctx, gpu.Name, gpuStatus); err != nil {
		t.Fatalf("applying status: %v", err)
	}
	// A VM: no thermal, power or GPU source. TEMP and POWER say why, GPUS
	// n/a, as the agent writes them, never 0.
	vm := c.createNodeAndTelemetry(ctx, t, "table-vm-node")
	vmStatus := telemetryv1alpha1.NodeTelemetryStatus{
		SampleTime:      metav1.NewTime(time.Now().Add(-5 * time.Second)),
		IntervalSeconds: 5,
		AgentVersion:    "v0.1.0",
		Summary:         &telemetryv1alpha1.Summary{CPU: "3%", Memory: "18%", Temperature: "NoSensors", Power: "NoPowerMeter", GPUs: "n/a", Speed: "cpu ref?"},
		CPU:             &telemetryv1alpha1.CPUStatus{LogicalCores: 2, OnlineCores: 2, UtilizationPercent: 3},
		Memory:          &telemetryv1alpha1.MemoryStatus{TotalBytes: 24 << 30, AvailableBytes: 20 << 30, UtilizationPercent: 18},
		// A CPU no table names: judged as the reference, and said so.
		Speed: &telemetryv1alpha1.SpeedStatus{CPUCoreMilli: 1000, CPUSource: telemetryv1alpha1.SpeedSourceReference,
			CPUBasis: "no table row for CPU Intel Xeon Processor (Skylake, IBRS)"},
		Sources: []telemetryv1alpha1.SourceStatus{
			{Name: telemetryv1alpha1.SourceThermal, State: telemetryv1alpha1.SourceUnavailable, Reason: "NoSensors", Message: "no thermal zones or hwmon temperature sensors"},
			{Name: telemetryv1alpha1.SourcePower, State: telemetryv1alpha1.SourceUnavailable, Reason: "NoPowerMeter", Message: "no powercap (RAPL), hwmon power sensor or ACPI power meter (typical in VMs)"},
		},
		Conditions: []metav1.Condition{{
			Type: telemetryv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SampleCollected",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second)),
		}},
	}
	if _, err := c.applyStatus(ctx, vm.Name, vmStatus); err != nil {
		t.Fatalf("applying status: %v", err)
	}

	raw, err := c.kube.Discovery().RESTClient().Get().
		AbsPath("/apis", telemetryv1alpha1.GroupName, "v1alpha1", "nodetelemetries").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(ctx).Raw()
	if err != nil {
		t.Fatalf("getting table: %v", err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		t.Fatalf("decoding table: %v\n%s", err, raw)
	}
	if table.Kind != "Table" {
		t.Fatalf("response kind = %q, want Table", table.Kind)
	}

	// Render it as kubectl does (its table printer and tab writer), so the
	// text a user sees is checked too.
	var out bytes.Buffer
	tw := printers.GetNewTabWriter(&out)
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, tw); err != nil {
		t.Fatalf("printing table: %v", err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get nt:\n%s", out.String())
	printed := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		fields := strings.Fields(line)
		printed[fields[0]] = fields
	}
	// The VM's TEMP and POWER say why they are empty, its GPUS read n/a.
	for name, want := range map[string][]string{
		"NAME":   {"NAME", "CPU", "MEMORY", "TEMP", "POWER", "GPUS", "SAMPLED"},
		gpu.Name: {gpu.Name, "45%", "62%", "71°C", "2150W", "7/8", "<age>"},
		vm.Name:  {vm.Name, "3%", "18%", "NoSensors", "NoPowerMeter", "n/a", "<age>"},
	} {
		got := append([]string(nil), printed[name]...)
		if name != "NAME" && len(got) > 0 {
			got[len(got)-1] = "<age>" // the SAMPLED age, checked below
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("printed row %s (-want +got):\n%s", name, diff)
		}
	}

	var columns []string
	for _, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			columns = append(columns, col.Name)
		} else {
			columns = append(columns, col.Name+"(wide)")
		}
	}
	wantColumns := []string{"Name", "CPU", "MEMORY", "TEMP", "POWER", "POWER-SRC(wide)", "GPUS", "SPEED(wide)",
		"READY(wide)", "OVERHEATING(wide)", "HOTTEST(wide)", "ALARMS(wide)", "POWER-EST%(wide)", "AGENT(wide)", "SAMPLED"}
	if diff := cmp.Diff(wantColumns, columns); diff != "" {
		t.Errorf("table columns (-want +got):\n%s", diff)
	}

	rows := map[string][]any{}
	for _, row := range table.Rows {
		if len(row.Cells) != len(table.ColumnDefinitions) {
			t.Fatalf("row has %d cells for %d columns: %v", len(row.Cells), len(table.ColumnDefinitions), row.Cells)
		}
		rows[row.Cells[0].(string)] = row.Cells
	}
	// The SAMPLED cell is the age of sampleTime, rendered like kubectl's AGE.
	for _, tc := range []struct {
		node       string
		want       []any // every cell but SAMPLED
		sampledAge *regexp.Regexp
	}{
		{
			node: gpu.Name,
			// POWER-SRC is status.power.sources as the server prints a list.
			want: []any{gpu.Name, "45%", "62%", "71°C", "2150W", `["rapl","nvml"]`, "7/8", "cpu 1.00x table, gpu 2.06x table",
				"True", "False", "coretemp.0/Package id 0", float64(1), float64(112), "v0.1.0-12-gabcdef0"},
			sampledAge: regexp.MustCompile(`^1[56]m$`), // 15 minutes old
		},
		{
			node: vm.Name,
			// No thermal, power or GPU data: the reason or n/a, never 0. No
			// Overheating condition, hottest sensor or calibration: empty
			// cells.
			want:       []any{vm.Name, "3%", "18%", "NoSensors", "NoPowerMeter", nil, "n/a", "cpu ref?", "True", nil, nil, nil, nil, "v0.1.0"},
			sampledAge: regexp.MustCompile(`^[5-9]s$`), // 5 seconds old
		},
	} {
		t.Run(tc.node, func(t *testing.T) {
			cells, ok := rows[tc.node]
			if !ok {
				t.Fatalf("no row for %s in %v", tc.node, rows)
			}
			if diff := cmp.Diff(tc.want, cells[:len(cells)-1]); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
			if age, _ := cells[len(cells)-1].(string); !tc.sampledAge.MatchString(age) {
				t.Errorf("SAMPLED = %q, want a match of %s", age, tc.sampledAge)
			}
		})
	}
}

// TestNodeTelemetryValidation sends invalid statuses to the real API server
// and checks each is rejected with an error that names the field.
func TestNodeTelemetryValidation(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)
	node := c.createNodeAndTelemetry(ctx, t, "validation-node")

	for _, tc := range []struct {
		name    string
		mutate  func(*telemetryv1alpha1.NodeTelemetryStatus)
		wantErr []string // substrings of the API server's message
	}{
		{
			name:    "cpu utilization of 150%",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.CPU.UtilizationPercent = 150 },
			wantErr: []string{"status.cpu.utilizationPercent", "should be less than or equal to 100"},
		},
		{
			name:    "negative node watts",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power.Watts = -5 },
			wantErr: []string{"status.power.watts", "should be greater than or equal to 0"},
		},
		{
			name:    "negative GPU watts",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[3].PowerWatts = ptr.To[int32](-1) },
			wantErr: []string{"status.gpus[3].powerWatts", "should be greater than or equal to 0"},
		},
		{
			name: "unknown power source",
			mutate: func(s *telemetryv1alpha1.NodeTelemetryStatus) {
				s.Power.Sources = []telemetryv1alpha1.PowerSource{"solar"}
			},
			wantErr: []string{"status.power.sources[0]", `Unsupported value: "solar"`},
		},
		{
			name:    "more memory available than installed",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Memory.AvailableBytes = s.Memory.TotalBytes + 1 },
			wantErr: []string{"status.memory", "availableBytes must not exceed totalBytes"},
		},
		{
			name:    "duplicate GPU UUID",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.GPUs[1].UUID = s.GPUs[0].UUID },
			wantErr: []string{"status", "gpus[].uuid must be unique"},
		},
		{
			name:    "ready power model without watts",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Power.Model.IdleWatts = nil },
			wantErr: []string{"status.power.model", "a ready model needs basis, idleWatts, fullLoadWatts and 11-point curveWatts"},
		},
		{
			// A falling curve would make a pod's marginal watts negative
			// and let one node switch off its rack's budget.
			name: "power curve falling as load rises",
			mutate: func(s *telemetryv1alpha1.NodeTelemetryStatus) {
				s.Power.Model.CurveWatts[6] = s.Power.Model.CurveWatts[5] - 1
			},
			wantErr: []string{"status.power.model.curveWatts", "curveWatts must be non-decreasing"},
		},
		{
			name: "full-load watts below idle",
			mutate: func(s *telemetryv1alpha1.NodeTelemetryStatus) {
				s.Power.Model.FullLoadWatts = ptr.To(*s.Power.Model.IdleWatts - 1)
			},
			wantErr: []string{"status.power.model.fullLoadWatts", "fullLoadWatts must not be below idleWatts"},
		},
		{
			name:    "negative window watts",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.Watts.P90 = -1 },
			wantErr: []string{"status.windows.watts.p90", "should be greater than or equal to 0"},
		},
		{
			name:    "window thermal margin past 2000°C",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.Windows.ThermalMarginCelsius.Min = -2001 },
			wantErr: []string{"status.windows.thermalMarginCelsius.min", "should be greater than or equal to -2000"},
		},
		{
			name:    "interval of 0 seconds",
			mutate:  func(s *telemetryv1alpha1.NodeTelemetryStatus) { s.IntervalSeconds = 0 },
			wantErr: []string{"status.intervalSeconds", "should be greater than or equal to 1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := fixtures.FullStatus(time.Now(), 2, 8)
			tc.mutate(&status)
			_, err := c.applyStatus(ctx, node.Name, status)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("apply error = %v, want Invalid", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}

	// The valid status is accepted, so the rejections above are each
	// caused by their one mutation.
	if _, err := c.applyStatus(ctx, node.Name, fixtures.FullStatus(time.Now(), 2, 8)); err != nil {
		t.Fatalf("applying a valid status: %v", err)
	}
}

// TestNodeTelemetryExplain reads the OpenAPI v3 document that `kubectl
// explain nodetelemetry.status` renders and checks that field docs are
// there.
func TestNodeTelemetryExplain(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	c := newClients(t)

	path := "/openapi/v3/apis/" + telemetryv1alpha1.GroupName + "/v1alpha1"
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	// The API server publishes a new CRD's schema shortly after the CRD is
	// established; wait for it.
	const schemaName = "io.telesched.telemetry.v1alpha1.NodeTelemetry"
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := c.kube.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Raw()
		if err == nil {
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("decoding %s: %v", path, err)
			}
			if _, ok := doc.Components.Schemas[schemaName]; ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("schema %s not published at %s within 30s (last error: %v)", schemaName, path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, tc := range []struct {
		field string
		want  string // a prefix of the description
	}{
		{field: "status", want: "status is the node's telemetry"},
		{field: "status.sampleTime", want: "sampleTime is when the agent took this sample"},
		{field: "status.thermal.hottestMilliCelsius", want: "hottestMilliCelsius is the hottest sensor's temperature"},
		{field: "status.power.sources", want: "sources are where watts came from"},
		{field: "status.power.model.idleWatts", want: "idleWatts is the curve at 0% CPU"},
		{field: "status.gpus.health.healthy", want: "healthy is false when the GPU should not be given new work"},
		{field: "status.numa.distances", want: "distances are the ACPI SLIT distances"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			schema := doc.Components.Schemas[schemaName]
			for _, name := range strings.Split(tc.field, ".") {
				schema = property(schema, name)
				if schema == nil {
					t.Fatalf("no schema for %s (at %q)", tc.field, name)
				}
			}
			if desc, _ := schema["description"].(string); !strings.HasPrefix(desc, tc.want) {
				t.Errorf("description of %s = %q, want prefix %q", tc.field, desc, tc.want)
			}
		})
	}
}

// property returns the schema of a named property of an object schema, or
// of the items of an array schema.
func property(schema map[string]any, name string) map[string]any {
	if items, ok := schema["items"].(map[string]any); ok {
		schema = items
	}
	props, _ := schema["properties"].(map[string]any)
	p, _ := props[name].(map[string]any)
	return p
}
