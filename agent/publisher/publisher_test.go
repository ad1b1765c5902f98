// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// invalid is the 422 the API server answers for a status that breaks the
// CRD's schema, with the causes it lists.
func invalid(causes ...metav1.StatusCause) error {
	err := apierrors.NewInvalid(schema.GroupKind{Group: "telemetry.telesched.io", Kind: "NodeTelemetry"}, "n", nil)
	err.ErrStatus.Details.Causes = causes
	return fmt.Errorf("applying NodeTelemetry n status: %w", err)
}

func TestRejectedSections(t *testing.T) {
	tooMany := metav1.StatusCause{Type: metav1.CauseTypeTooMany, Field: "status.gpus", Message: "Too many: 17: must have at most 16 items"}
	// kube-apiserver adds this cause when the schema fails, before CEL.
	notChecked := metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: "<nil>", Message: "Invalid value: null: some validation rules were not checked because the object was invalid"}
	for _, tc := range []struct {
		name string
		err  error
		want string // fmt of the map, "map[]" for nil
	}{
		{"17 GPUs, as kube-apiserver words it", invalid(tooMany, notChecked), "map[gpus:status.gpus: Too many: 17: must have at most 16 items]"},
		{"two causes in two sections", invalid(
			metav1.StatusCause{Field: "status.numa[0].cpus", Message: "Too long"},
			metav1.StatusCause{Field: "status.gpus[3]", Message: "Invalid value"}),
			"map[gpus:status.gpus[3]: Invalid value numa:status.numa[0].cpus: Too long]"},
		{"a field outside the sections", invalid(metav1.StatusCause{Field: "status.intervalSeconds", Message: "must be <= 3600"}), "map[]"},
		{"only the server's note", invalid(notChecked), "map[]"},
		{"not a 422", apierrors.NewConflict(schema.GroupResource{}, "n", errors.New("x")), "map[]"},
		{"no error", nil, "map[]"},
	} {
		if got := fmt.Sprint(rejectedSections(tc.err)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// refusal is the 500 kube-apiserver v1.37 answers for a server-side apply
// that carries fields the CRD's schema lacks; the messages are the ones it
// sent a telesched agent on a cluster with the 0.1.0 CRDs (test/node, the
// previous chart).
func refusal(msg string) error {
	return fmt.Errorf("applying NodeTelemetry vm status: %w", apierrors.NewInternalError(errors.New(msg)))
}

func badRequest(msg string) error {
	return fmt.Errorf("applying NodeTelemetry vm status: %w", apierrors.NewBadRequest(msg))
}

func TestUndeclaredFields(t *testing.T) {
	one := `failed to create typed patch object (/vm; telemetry.telesched.io/v1alpha1, Kind=NodeTelemetry): .status.speed: field not declared in schema`
	three := "failed to create typed patch object (/vm; telemetry.telesched.io/v1alpha1, Kind=NodeTelemetry): errors:\n" +
		"  .status.summary.speed: field not declared in schema\n" +
		"  .status.speed: field not declared in schema\n" +
		"  .status.windows: field not declared in schema"
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"one field", refusal(one), "[.status.speed]"},
		{"one field, as a 400", badRequest(one), "[.status.speed]"},
		{"three fields, one a section's", refusal(three), "[.status.summary.speed .status.speed .status.windows]"},
		{"a list element's field", refusal(`errors:
  .status.gpus[uuid="GPU-1"].speed: field not declared in schema
  .status.gpus[uuid="GPU-2"].speed: field not declared in schema`), `[.status.gpus[uuid="GPU-1"].speed .status.gpus[uuid="GPU-2"].speed]`},
		{"another bad request", badRequest("error decoding patch: invalid character"), "[]"},
		{"another internal error", refusal("etcdserver: request timed out"), "[]"},
		{"the words in a Conflict", apierrors.NewConflict(schema.GroupResource{}, "n", errors.New(".status.speed: field not declared in schema")), "[]"},
		{"the words in a 422", invalid(metav1.StatusCause{Field: "status.speed", Message: ".status.speed: field not declared in schema"}), "[]"},
		{"no error", nil, "[]"},
	} {
		if got := fmt.Sprint(undeclaredFields(tc.err)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestWithoutFields(t *testing.T) {
	var st telemetryv1alpha1.NodeTelemetryStatus
	if err := json.Unmarshal([]byte(`{"summary":{"cpu":"10%","speed":"cpu 0.79x table"},
		"speed":{"cpuCoreMilli":785,"cpuSource":"table"},
		"numa":[{"id":0,"cpus":"0-3","logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0},{"id":1,"cpus":"4-7","logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0}]}`), &st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		fields []string
		want   string
	}{
		{"nothing", nil, `{"agentVersion":"","intervalSeconds":0,"numa":[{"cpus":"0-3","id":0,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0},{"cpus":"4-7","id":1,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0}],"sampleTime":null,"speed":{"cpuCoreMilli":785,"cpuSource":"table"},"summary":{"cpu":"10%","speed":"cpu 0.79x table"}}`},
		{"a section and a summary's field", []string{".status.speed", ".status.summary.speed"},
			`{"agentVersion":"","intervalSeconds":0,"numa":[{"cpus":"0-3","id":0,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0},{"cpus":"4-7","id":1,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0}],"sampleTime":null,"summary":{"cpu":"10%"}}`},
		{"a list element's field goes from every element", []string{`.status.numa[id=0].logicalCores`},
			`{"agentVersion":"","intervalSeconds":0,"numa":[{"cpus":"0-3","id":0,"memoryFreeBytes":0,"memoryTotalBytes":0},{"cpus":"4-7","id":1,"memoryFreeBytes":0,"memoryTotalBytes":0}],"sampleTime":null,"speed":{"cpuCoreMilli":785,"cpuSource":"table"},"summary":{"cpu":"10%","speed":"cpu 0.79x table"}}`},
		{"a key with a dot in its value", []string{`.status.numa[cpus="0.3"].logicalCores`},
			`{"agentVersion":"","intervalSeconds":0,"numa":[{"cpus":"0-3","id":0,"memoryFreeBytes":0,"memoryTotalBytes":0},{"cpus":"4-7","id":1,"memoryFreeBytes":0,"memoryTotalBytes":0}],"sampleTime":null,"speed":{"cpuCoreMilli":785,"cpuSource":"table"},"summary":{"cpu":"10%","speed":"cpu 0.79x table"}}`},
		{"a path the status lacks, and one outside it", []string{".status.thermal.zones", ".metadata.name"},
			`{"agentVersion":"","intervalSeconds":0,"numa":[{"cpus":"0-3","id":0,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0},{"cpus":"4-7","id":1,"logicalCores":4,"memoryFreeBytes":0,"memoryTotalBytes":0}],"sampleTime":null,"speed":{"cpuCoreMilli":785,"cpuSource":"table"},"summary":{"cpu":"10%","speed":"cpu 0.79x table"}}`},
	} {
		got, err := withoutFields(&st, tc.fields)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.name, b, tc.want)
		}
	}
}
