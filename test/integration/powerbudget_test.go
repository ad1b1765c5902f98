package integration

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

var pbResource = telemetryv1alpha1.SchemeGroupVersion.WithResource("powerbudgets")

// TestPowerBudgetValidation: the API server refuses a bad budget with the
// field that is wrong, as `kubectl apply` (strict field validation) sends
// it, and takes a good one.
func TestPowerBudgetValidation(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	const good = `apiVersion: telemetry.telesched.io/v1alpha1
kind: PowerBudget
metadata:
  name: NAME
spec:
  nodeSelector:
    matchLabels:
      topology.kubernetes.io/zone: rack-a
  budgetWatts: 12000
  reserveWatts: 500
`
	for _, tc := range []struct {
		name, from, to string
		want           []string // in the error; nil: accepted
	}{
		{"good", "", "", nil},
		{"good, by expression", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: example.com/pdu, operator: In, values: [pdu-1, pdu-2]}\n", nil},
		{"zero budget", "budgetWatts: 12000", "budgetWatts: 0", []string{"spec.budgetWatts", "greater than or equal to 1"}},
		{"negative budget", "budgetWatts: 12000", "budgetWatts: -5", []string{"spec.budgetWatts", "greater than or equal to 1"}},
		{"negative reserve", "reserveWatts: 500", "reserveWatts: -1", []string{"spec.reserveWatts", "greater than or equal to 0"}},
		{"reserve over budget", "reserveWatts: 500", "reserveWatts: 12000", []string{"spec.reserveWatts", "reserveWatts must be below budgetWatts"}},
		{"no selector", "  nodeSelector:\n    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n", "", []string{"spec.nodeSelector", "Required value"}},
		{"empty selector", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n", "    matchLabels: {}\n",
			[]string{"spec.nodeSelector", "an empty selector would pick every node"}},
		{"bad label key", "topology.kubernetes.io/zone: rack-a", "Rack A: rack-a", []string{"spec.nodeSelector.matchLabels", "a label key is"}},
		{"bad label value", "zone: rack-a", "zone: rack a!", []string{"spec.nodeSelector.matchLabels.topology.kubernetes.io/zone", "should match"}},
		{"bad operator", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: rack, operator: Near, values: [a]}\n", []string{"spec.nodeSelector.matchExpressions[0].operator", "Unsupported value"}},
		{"In without values", "    matchLabels:\n      topology.kubernetes.io/zone: rack-a\n",
			"    matchExpressions:\n    - {key: rack, operator: In}\n", []string{"spec.nodeSelector.matchExpressions[0]", "In and NotIn need values"}},
		{"unknown field", "reserveWatts: 500", "reserveWatts: 500\n  budgetAmps: 50", []string{`unknown field "spec.budgetAmps"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, "NAME", "pb-"+strings.NewReplacer(" ", "-", ",", "").Replace(tc.name), 1)
			if tc.from != "" {
				if !strings.Contains(doc, tc.from) {
					t.Fatalf("case edits %q, which the good budget lacks", tc.from)
				}
				doc = strings.Replace(doc, tc.from, tc.to, 1)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			_, err := c.dyn.Resource(pbResource).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a good budget was refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("create error = %v, want Invalid or BadRequest", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
