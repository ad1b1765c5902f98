//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/telesched/telesched/deploy/crds"
)

// installCRDs is the workloads' prepare hook: the committed CRDs, in the
// workload's API server, for the default profile's runs too, which write
// the same NodeTelemetry.
func installCRDs(tCtx ktesting.TContext) error {
	return ensureCRDs(tCtx, tCtx.RESTConfig())
}

// withCRDs wraps every factory of r so that it installs the CRDs in its
// scheduler's API server first: scheduler_perf builds the scheduler, and
// with it the plugins, whose caches wait for NodeTelemetry to be listed,
// before the prepare hook runs.
func withCRDs(r frameworkruntime.Registry) frameworkruntime.Registry {
	out := frameworkruntime.Registry{}
	for name, factory := range r {
		out[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			if err := ensureCRDs(ctx, h.KubeConfig()); err != nil {
				return nil, err
			}
			return factory(ctx, args, h)
		}
	}
	return out
}

// ensureCRDs creates the CRDs that are missing and waits until all are
// established.
func ensureCRDs(ctx context.Context, cfg *rest.Config) error {
	defs, err := crds.Load()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range defs {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}
