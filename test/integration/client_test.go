// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	applytelemetry "github.com/telesched/telesched/apis/telemetry/client/applyconfiguration/telemetry/v1alpha1"
	"github.com/telesched/telesched/apis/telemetry/client/clientset/versioned"
	"github.com/telesched/telesched/apis/telemetry/client/informers/externalversions"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/test/fixtures"
)

// TestGeneratedClient: the typed client generated for integrators
// (apis/telemetry/client) speaks to a real API server with the CRDs
// installed: the resources' plurals and scope, the status subresource
// through server-side apply, and informers and listers that see both kinds.
func TestGeneratedClient(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	kube := newClients(t).kube
	tc := versioned.NewForConfigOrDie(cfg).TelemetryV1alpha1()

	node, err := kube.CoreV1().Nodes().Create(ctx, fixtures.Node("client-node"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nt := &telemetryv1alpha1.NodeTelemetry{ObjectMeta: metav1.ObjectMeta{
		Name:            node.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
	}}
	if _, err := tc.NodeTelemetries().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create NodeTelemetry: %v", err)
	}

	// The status as the agent writes it: server-side apply on the status
	// subresource, built from the apply configurations.
	sampled := metav1.NewTime(time.Now().Truncate(time.Second))
	status := applytelemetry.NodeTelemetryStatus().
		WithSampleTime(sampled).WithIntervalSeconds(1).WithAgentVersion("v0.2.0").
		WithCPU(applytelemetry.CPUStatus().WithLogicalCores(2).WithOnlineCores(2).WithUtilizationPercent(37))
	got, err := tc.NodeTelemetries().ApplyStatus(ctx, applytelemetry.NodeTelemetry(node.Name).WithStatus(status),
		metav1.ApplyOptions{FieldManager: "client-test", Force: true})
	if err != nil {
		t.Fatalf("ApplyStatus: %v", err)
	}
	if got.Status.CPU == nil || got.Status.CPU.UtilizationPercent != 37 || !got.Status.SampleTime.Equal(&sampled) {
		t.Fatalf("ApplyStatus returned status %+v, want CPU 37%% sampled at %v", got.Status, sampled)
	}

	pb := applytelemetry.PowerBudget("client-rack").WithSpec(applytelemetry.PowerBudgetSpec().
		WithBudgetWatts(5000).WithReserveWatts(500).
		WithNodeSelector(applytelemetry.NodeSelector().WithMatchLabels(map[string]telemetryv1alpha1.LabelValue{"topology.kubernetes.io/zone": "client-rack"})))
	if _, err := tc.PowerBudgets().Apply(ctx, pb, metav1.ApplyOptions{FieldManager: "client-test"}); err != nil {
		t.Fatalf("Apply PowerBudget: %v", err)
	}
	t.Cleanup(func() { _ = tc.PowerBudgets().Delete(ctx, "client-rack", metav1.DeleteOptions{}) })
	// The CRD's own validation reaches the typed client's caller.
	bad := applytelemetry.PowerBudget("client-bad").WithSpec(applytelemetry.PowerBudgetSpec().
		WithBudgetWatts(100).WithReserveWatts(200).
		WithNodeSelector(applytelemetry.NodeSelector().WithMatchLabels(map[string]telemetryv1alpha1.LabelValue{"rack": "a"})))
	if _, err := tc.PowerBudgets().Apply(ctx, bad, metav1.ApplyOptions{FieldManager: "client-test"}); err == nil {
		t.Error("a PowerBudget whose reserve exceeds its budget was accepted")
	}

	// Informers and listers of both kinds.
	factory := externalversions.NewSharedInformerFactory(versioned.NewForConfigOrDie(cfg), 0)
	nts := factory.Telemetry().V1alpha1().NodeTelemetries()
	pbs := factory.Telemetry().V1alpha1().PowerBudgets()
	nts.Informer()
	pbs.Informer()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), nts.Informer().HasSynced, pbs.Informer().HasSynced) {
		t.Fatal("informers never synced")
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		seen, err := nts.Lister().Get(node.Name)
		return err == nil && seen.Status.CPU != nil, nil
	}); err != nil {
		t.Fatalf("the NodeTelemetry lister never saw %s with its status: %v", node.Name, err)
	}
	budgets, err := pbs.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range budgets {
		if b.Name == "client-rack" {
			found = b.Spec.BudgetWatts == 5000 && b.Spec.ReserveWatts != nil && *b.Spec.ReserveWatts == 500
		}
	}
	if !found {
		t.Errorf("the PowerBudget lister has no client-rack of 5000 W less 500: %d budgets", len(budgets))
	}

	// Deleting the Node garbage-collects its NodeTelemetry only with a
	// garbage collector, which this control plane does not run; delete both.
	if err := tc.NodeTelemetries().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("Delete NodeTelemetry: %v", err)
	}
	_ = kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
}
