// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
)

// evictClient is the clientset upstream's PodEvictor evicts through. Its
// Eviction API calls are sent once: client-go retries a 429 Too Many
// Requests up to 10 times, waiting its Retry-After (10 s when a
// PodDisruptionBudget allows no disruption), which would hold a cycle for
// 100 s on one refusing PDB. A refusal is an answer; the Gate keeps the
// pod out of the next cycles for the cool-down.
//
// With dryRun, every eviction is a server-side dry run
// (DeleteOptions.DryRun: All): the API server checks it, PDBs included,
// and deletes nothing. Upstream's PodEvictor calls the Eviction API in its
// own dry-run mode too (upstream's run loop hands it a fake clientset).
type evictClient struct {
	kubernetes.Interface
	dryRun bool
}

func (c evictClient) PolicyV1() typedpolicyv1.PolicyV1Interface {
	return evictPolicy{c.Interface.PolicyV1(), c.dryRun}
}

type evictPolicy struct {
	typedpolicyv1.PolicyV1Interface
	dryRun bool
}

func (p evictPolicy) Evictions(namespace string) typedpolicyv1.EvictionInterface {
	return evictionsOnce{p.PolicyV1Interface.Evictions(namespace), p.PolicyV1Interface, p.dryRun}
}

type evictionsOnce struct {
	typedpolicyv1.EvictionInterface
	policy typedpolicyv1.PolicyV1Interface
	dryRun bool
}

// Evict is client-go's Evict (eviction_expansion.go: a POST to the pod's
// eviction subresource), sent once.
func (e evictionsOnce) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
	if e.dryRun {
		eviction = eviction.DeepCopy()
		if eviction.DeleteOptions == nil {
			eviction.DeleteOptions = &metav1.DeleteOptions{}
		}
		eviction.DeleteOptions.DryRun = []string{metav1.DryRunAll}
	}
	return e.policy.RESTClient().Post().
		AbsPath("/api/v1").
		Namespace(eviction.Namespace).Resource("pods").Name(eviction.Name).SubResource("eviction").
		MaxRetries(0).
		Body(eviction).
		Do(ctx).Error()
}
