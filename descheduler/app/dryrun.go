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

// dryRunClient sends every eviction as a server-side dry run
// (DeleteOptions.DryRun: All): the API server checks it, PDBs included,
// and deletes nothing. Upstream's PodEvictor calls the Eviction API in
// its own dry-run mode too (its run loop hands it a fake clientset
// instead), so in --dry-run it gets this client.
type dryRunClient struct{ kubernetes.Interface }

func (c dryRunClient) PolicyV1() typedpolicyv1.PolicyV1Interface {
	return dryRunPolicy{c.Interface.PolicyV1()}
}

type dryRunPolicy struct {
	typedpolicyv1.PolicyV1Interface
}

func (p dryRunPolicy) Evictions(namespace string) typedpolicyv1.EvictionInterface {
	return dryRunEvictions{p.PolicyV1Interface.Evictions(namespace)}
}

type dryRunEvictions struct {
	typedpolicyv1.EvictionInterface
}

func (e dryRunEvictions) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
	eviction = eviction.DeepCopy()
	if eviction.DeleteOptions == nil {
		eviction.DeleteOptions = &metav1.DeleteOptions{}
	}
	eviction.DeleteOptions.DryRun = []string{metav1.DryRunAll}
	return e.EvictionInterface.Evict(ctx, eviction)
}
