// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/publisher"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/deploy/crds"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/test/fixtures"
)

// previousChart is the release before this one, as test/node installs it.
const previousChart = "../node/testdata/telesched-0.1.0.tgz"

// TestPublisherOnThePreviousCRDs: the CRDs are upgraded apart from the
// agents (docs/install.md, "Upgrade and uninstall"), and the CRDs of the
// chart 0.1.0 never are by Helm, so this agent can meet the CRDs of the
// release before it. Server-side apply refuses a whole write
// that carries one field the schema lacks (400, "field not declared in
// schema"), so before the publisher knew that, every write failed and the
// agent never turned Ready (test/node). Now it leaves out exactly the
// fields the previous schema lacks, every other one arrives, and the
// Outcome names them.
func TestPublisherOnThePreviousCRDs(t *testing.T) {
	needControlPlane(t)
	defs := chartCRDs(t, previousChart)
	prev := secondControlPlane(t, controlplane.Options{CRDs: defs})
	ctx := t.Context()
	const name = "previous-crds"
	if _, err := kubernetes.NewForConfigOrDie(prev.Config).CoreV1().Nodes().Create(ctx,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client, err := kube.New(prev.Config)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publisher.New(publisher.Config{NodeName: name, FieldManager: publisher.DefaultFieldManager, Heartbeat: time.Minute,
		RateLimitQPS: 10, RateLimitBurst: 10, BackoffInitial: time.Second, BackoffMax: time.Second, Deadbands: publisher.DefaultDeadbands()},
		client, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	st := fixtures.FullStatus(time.Now(), 2, 2)
	data, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	if err := json.Unmarshal(data, &sent); err != nil {
		t.Fatal(err)
	}
	schema := statusSchema(t, defs)
	want := undeclaredIn(schema, sent, ".status")
	if len(want) == 0 {
		t.Fatal("the previous CRD declares every field this status carries: nothing to test")
	}
	t.Logf("fields of this status the previous CRD lacks: %v", want)

	out := pub.Offer(ctx, &st)
	if !out.Published || out.Err != nil {
		t.Fatalf("Offer = %+v, want published without the fields the previous CRD lacks", out)
	}
	var got []string
	for _, f := range out.Undeclared {
		got = append(got, listKey.ReplaceAllString(f, "[]"))
	}
	got = slices.Compact(slices.Sorted(slices.Values(got)))
	if !slices.Equal(got, want) {
		t.Errorf("Outcome.Undeclared = %v (list keys folded: %v), want %v", out.Undeclared, got, want)
	}
	u, err := dynamic.NewForConfigOrDie(prev.Config).Resource(ntResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written, _, _ := unstructured.NestedMap(u.Object, "status")
	for _, section := range []string{"cpu", "memory", "numa", "gpus", "power", "thermal", "summary", "sources"} {
		if _, ok := sent[section]; !ok {
			continue
		}
		if _, ok := written[section]; !ok {
			t.Errorf("status.%s did not arrive; the status written: %v", section, written)
		}
	}
}

// listKey is a list element's key in a server-side apply path.
var listKey = regexp.MustCompile(`\[[^\]]*\]`)

// chartCRDs reads the CRDs out of a packaged chart.
func chartCRDs(t *testing.T, tgz string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(h.Name, "/crds/") || !strings.HasSuffix(h.Name, ".yaml") {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		defs, err := crds.Decode(h.Name, data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, defs...)
	}
	if len(out) == 0 {
		t.Fatalf("no CRDs in %s", tgz)
	}
	return out
}

// statusSchema is the NodeTelemetry CRD's schema of status, v1alpha1.
func statusSchema(t *testing.T, defs []*apiextensionsv1.CustomResourceDefinition) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, d := range defs {
		if d.Spec.Names.Kind != "NodeTelemetry" {
			continue
		}
		for _, v := range d.Spec.Versions {
			if v.Name == telemetryv1alpha1.SchemeGroupVersion.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				return v.Schema.OpenAPIV3Schema.Properties["status"]
			}
		}
	}
	t.Fatal("no NodeTelemetry v1alpha1 schema")
	return apiextensionsv1.JSONSchemaProps{}
}

// undeclaredIn walks a JSON value against its schema and returns the paths
// of the object fields the schema does not declare (a list's elements as
// "[]"), sorted.
func undeclaredIn(schema apiextensionsv1.JSONSchemaProps, v any, path string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if schema.XPreserveUnknownFields != nil && *schema.XPreserveUnknownFields {
			return nil
		}
		for k, x := range v {
			s, ok := schema.Properties[k]
			if !ok && schema.AdditionalProperties != nil && schema.AdditionalProperties.Schema != nil {
				s, ok = *schema.AdditionalProperties.Schema, true
			}
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, undeclaredIn(s, x, path+"."+k)...)
		}
	case []any:
		if schema.Items == nil || schema.Items.Schema == nil {
			return nil
		}
		for _, x := range v {
			out = append(out, undeclaredIn(*schema.Items.Schema, x, path+"[]")...)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
