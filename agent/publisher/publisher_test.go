// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package publisher

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
