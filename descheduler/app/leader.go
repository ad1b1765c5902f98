// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/descheduler"
)

// Defaults of the leader election flags: kube-scheduler's durations, a
// Lease of the descheduler's own in kube-system (as the scheduler's
// telesched-scheduler Lease).
const (
	DefaultLeaseDuration  = 15 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
	DefaultLeaseNamespace = "kube-system"
	DefaultLeaseName      = "telesched-descheduler"
)

// LeaderElection are the leader election settings (--leader-elect*):
// replicas elect one leader on a Lease, and only the leader runs cycles,
// so two replicas never both evict up to the per-cycle limits.
type LeaderElection struct {
	Enabled                                   bool
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Namespace, Name                           string
	// Identity is this replica's holder identity; empty: the host name
	// and a UUID, as kube-scheduler's.
	Identity string
}

// DefaultLeaderElection is the documented default: on.
func DefaultLeaderElection() LeaderElection {
	return LeaderElection{Enabled: true, LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod,
		Namespace: DefaultLeaseNamespace, Name: DefaultLeaseName}
}

// Validate names the flag and value of the first bad setting.
func (le LeaderElection) Validate() error {
	if !le.Enabled {
		return nil
	}
	switch {
	case le.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be > 0, got %s", le.RetryPeriod)
	case le.RenewDeadline <= le.RetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline %s must be longer than --leader-elect-retry-period %s", le.RenewDeadline, le.RetryPeriod)
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration %s must be longer than --leader-elect-renew-deadline %s", le.LeaseDuration, le.RenewDeadline)
	case le.Namespace == "" || le.Name == "":
		return fmt.Errorf("--leader-elect-resource-namespace %q and --leader-elect-resource-name %q must not be empty", le.Namespace, le.Name)
	}
	return nil
}

// RunElected runs run while this replica holds the Lease: it waits for
// it, runs, and returns when ctx ends (releasing the Lease, so a standby
// takes over within a retry period) or with an error when the Lease is
// lost, so the process exits and comes back as a standby.
func RunElected(ctx context.Context, cfg *rest.Config, le LeaderElection, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "telesched-descheduler-leader-election"))
	if err != nil {
		return err
	}
	id := le.Identity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		id = host + "_" + string(uuid.NewUUID())
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	lease := le.Namespace + "/" + le.Name
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: DefaultLeaseName, ReleaseOnCancel: true,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				descheduler.SetLeader(true)
				logger.Info("Leading: descheduling cycles start", "lease", lease, "identity", id)
				run(ctx)
			},
			OnStoppedLeading: func() {
				descheduler.SetLeader(false)
				logger.Info("No longer leading", "lease", lease, "identity", id)
			},
			OnNewLeader: func(holder string) {
				if holder != id {
					logger.Info("Standing by: another replica leads", "lease", lease, "leader", holder)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	logger.Info("Waiting for the lease", "lease", lease, "identity", id)
	elector.Run(ctx)
	if ctx.Err() == nil {
		return fmt.Errorf("lost the lease %s", lease)
	}
	return nil
}
