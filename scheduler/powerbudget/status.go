// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Defaults of StatusOptions.
const (
	DefaultStatusInterval        = 10 * time.Second
	DefaultStatusHeartbeat       = time.Minute
	DefaultStatusDeadbandPercent = 1
	DefaultLeaseNamespace        = "kube-system"
	DefaultLeaseName             = "telesched-powerbudget-status"
)

// Condition types and reasons of a PowerBudget's status.
const (
	ConditionReady      = "Ready"
	ConditionOverBudget = "OverBudget"

	ReasonMeasured          = "Measured"
	ReasonNodesWithoutPower = "NodesWithoutPower"
	ReasonNoNodes           = "NoNodes"
	ReasonOverBudget        = "OverBudget"
	ReasonWithinBudget      = "WithinBudget"
)

// fieldManager is the field manager of the status writer's patches.
const fieldManager = "telesched-scheduler"

// StatusOptions are how the status writer runs.
type StatusOptions struct {
	// Interval is how often every replica computes each budget's numbers
	// (its metrics); the lease holder then writes the statuses that
	// changed.
	Interval time.Duration
	// Heartbeat: a status is written at least this often, so updateTime
	// says the numbers are current.
	Heartbeat time.Duration
	// DeadbandPercent: a change of the watts smaller than this percentage
	// of the budget is not written before the heartbeat (conditions and
	// node counts always are).
	DeadbandPercent int32
	// LeaseNamespace and LeaseName name the Lease that elects the one
	// replica that writes.
	LeaseNamespace, LeaseName string
}

// DefaultStatusOptions returns the defaults.
func DefaultStatusOptions() StatusOptions {
	return StatusOptions{
		Interval: DefaultStatusInterval, Heartbeat: DefaultStatusHeartbeat, DeadbandPercent: DefaultStatusDeadbandPercent,
		LeaseNamespace: DefaultLeaseNamespace, LeaseName: DefaultLeaseName,
	}
}

// Validate checks the options; flag names in the errors.
func (o StatusOptions) Validate() error {
	switch {
	case o.Interval <= 0:
		return fmt.Errorf("--power-budget-status-interval must be greater than 0, got %v", o.Interval)
	case o.Heartbeat < o.Interval:
		return fmt.Errorf("--power-budget-status-heartbeat (%v) must be at least --power-budget-status-interval (%v)", o.Heartbeat, o.Interval)
	case o.DeadbandPercent < 0 || o.DeadbandPercent > 50:
		return fmt.Errorf("--power-budget-status-deadband-percent must be between 0 and 50, got %d", o.DeadbandPercent)
	case o.LeaseNamespace == "" || o.LeaseName == "":
		return fmt.Errorf("--power-budget-lease-namespace and --power-budget-lease-name must not be empty")
	}
	return nil
}

// statusWriter publishes the domains' numbers: metrics on every replica,
// and each PowerBudget's status from the one replica that holds the Lease.
// Every replica follows the same Nodes, Pods, NodeTelemetry and budgets,
// and counts pods by their bindings as well as by its own placements, so
// the holder's numbers are right whether or not it is the replica that
// schedules; the Lease only keeps two writers from fighting.
type statusWriter struct {
	d       *Domains
	opts    StatusOptions
	maxAge  time.Duration
	client  dynamic.Interface
	leading func() bool
	// recorder records Events on the budgets; nil records none.
	recorder events.EventRecorder
	written  map[string]writtenStatus
	// calibrated is, per node, how many measurements its NodeTelemetry's
	// status.calibration was last written with.
	calibrated map[string]int64
}

type writtenStatus struct {
	status telemetryv1alpha1.PowerBudgetStatus
	at     time.Time
}

// runStatus computes the numbers every interval until ctx ends, and runs
// for the Lease beside it.
func (d *Domains) runStatus(ctx context.Context, cfg *rest.Config, opts StatusOptions, maxAge time.Duration, recorder events.EventRecorder) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaseNamespace, opts.LeaseName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return err
	}
	var leading atomic.Bool
	// The first statuses are written as soon as the lease is won, not an
	// interval later.
	won := make(chan struct{}, 1)
	logger := klog.FromContext(ctx).WithValues("lease", opts.LeaseNamespace+"/"+opts.LeaseName)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: "power budget status",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("writing PowerBudget status")
				leading.Store(true)
				select {
				case won <- struct{}{}:
				default:
				}
			},
			OnStoppedLeading: func() {
				logger.Info("no longer writing PowerBudget status")
				leading.Store(false)
			},
		},
	})
	if err != nil {
		return err
	}
	go func() {
		for ctx.Err() == nil {
			elector.Run(ctx) // returns when the lease is lost; stand again
		}
	}()
	w := &statusWriter{d: d, opts: opts, maxAge: maxAge, client: client, leading: leading.Load, recorder: recorder,
		written: map[string]writtenStatus{}, calibrated: map[string]int64{}}
	go w.loop(ctx, won)
	return nil
}

func (w *statusWriter) loop(ctx context.Context, won <-chan struct{}) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	// The first numbers as soon as the domains have their members.
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		for !w.d.Synced() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-won:
		case <-synced:
			synced = nil
		}
	}
}

func (w *statusWriter) tick(ctx context.Context) {
	if !w.d.Synced() {
		return // no members yet: the numbers would read 0
	}
	now := w.d.cache.Now()
	snap := w.d.ExportMetrics(now, w.maxAge)
	if !w.leading() {
		return
	}
	logger := klog.FromContext(ctx)
	for i := range snap.Domains {
		dom := &snap.Domains[i]
		st := StatusOf(dom, now)
		last, ok := w.written[dom.Name]
		if !ok {
			last = writtenStatus{status: dom.Status}
			if dom.Status.UpdateTime != nil {
				last.at = dom.Status.UpdateTime.Time
			}
		}
		if !w.due(dom, last, st, now) {
			continue
		}
		if err := w.write(ctx, dom.Name, st); err != nil {
			logger.Error(err, "writing PowerBudget status", "powerBudget", dom.Name)
			continue
		}
		w.recordSources(dom, last.status, st)
		w.written[dom.Name] = writtenStatus{status: st, at: now}
	}
	for name := range w.written {
		if !snap.has(name) {
			delete(w.written, name)
		}
	}
	w.writeCalibrations(ctx)
}

// writeCalibrations writes status.calibration of each NodeTelemetry whose
// node the book measured again since the last write (estimate's
// calibration). The agent owns the rest of the status and never writes
// this field, so its server-side applies leave it.
func (w *statusWriter) writeCalibrations(ctx context.Context) {
	if w.d.book == nil {
		return
	}
	seen := map[string]bool{}
	for _, c := range w.d.book.Calibrations() {
		seen[c.Node] = true
		if w.calibrated[c.Node] == c.Measurements {
			continue
		}
		cal := telemetryv1alpha1.PowerCalibration{
			MeasuredPercentOfPredicted: int32(math.Round(100 * c.Ratio)),
			Measurements:               c.Measurements,
			UpdateTime:                 metav1.NewTime(c.At),
		}
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"calibration": cal}})
		if err != nil {
			continue
		}
		_, err = w.client.Resource(telemetry.Resource).Patch(ctx, c.Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "writing NodeTelemetry status.calibration", "node", c.Node)
			continue
		}
		w.calibrated[c.Node] = c.Measurements
	}
	for name := range w.calibrated {
		if !seen[name] {
			delete(w.calibrated, name)
		}
	}
}

// Event reasons on a PowerBudget when its condition PowerSourcesComparable
// turns False (its reason) or back True.
const EventPowerSourcesComparable = "PowerSourcesComparable"

// recordSources records an Event on the budget when the status written,
// st, changes its condition PowerSourcesComparable from old's: a Warning
// with the condition's reason when it turns False (or changes reason), a
// Normal one when it turns True again. It runs after the write, on the
// replica that writes, so one change gives one Event.
func (w *statusWriter) recordSources(dom *Domain, old, st telemetryv1alpha1.PowerBudgetStatus) {
	c := meta.FindStatusCondition(st.Conditions, ConditionPowerSourcesComparable)
	if w.recorder == nil || c == nil || c.Status == metav1.ConditionUnknown {
		return
	}
	was := meta.FindStatusCondition(old.Conditions, ConditionPowerSourcesComparable)
	switch {
	case c.Status == metav1.ConditionFalse && (was == nil || was.Status != c.Status || was.Reason != c.Reason):
		w.recorder.Eventf(budgetRef(dom), nil, corev1.EventTypeWarning, c.Reason, "CountPowerSources", "%s", c.Message)
	case c.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
		w.recorder.Eventf(budgetRef(dom), nil, corev1.EventTypeNormal, EventPowerSourcesComparable, "CountPowerSources", "%s", c.Message)
	}
}

// budgetRef is the budget an Event is about: kind, name and UID, which
// `kubectl describe powerbudget` matches.
func budgetRef(dom *Domain) *telemetryv1alpha1.PowerBudget {
	return &telemetryv1alpha1.PowerBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(), Kind: "PowerBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: dom.Name, UID: dom.UID},
	}
}

func (s *Snapshot) has(name string) bool {
	for i := range s.Domains {
		if s.Domains[i].Name == name {
			return true
		}
	}
	return false
}

// due says whether st differs enough from the last status written to be
// written: a new generation, node counts, the power sources, a condition's status or reason,
// watts that moved by the deadband, or the heartbeat.
func (w *statusWriter) due(dom *Domain, last writtenStatus, st telemetryv1alpha1.PowerBudgetStatus, now time.Time) bool {
	old := last.status
	if now.Sub(last.at) >= w.opts.Heartbeat || old.ObservedGeneration != st.ObservedGeneration ||
		old.Nodes != st.Nodes || old.NodesWithoutPower != st.NodesWithoutPower || old.MeasuredWatts == nil ||
		!slices.Equal(old.PowerSources, st.PowerSources) {
		return true
	}
	for _, c := range st.Conditions {
		oc := meta.FindStatusCondition(old.Conditions, c.Type)
		if oc == nil || oc.Status != c.Status || oc.Reason != c.Reason {
			return true
		}
	}
	band := float64(dom.BudgetWatts) * float64(w.opts.DeadbandPercent) / 100
	moved := func(a, b *int64) bool { return a == nil || b == nil || math.Abs(float64(*a-*b)) >= max(band, 1) }
	return moved(old.MeasuredWatts, st.MeasuredWatts) || moved(old.ReservedWatts, st.ReservedWatts)
}

// write replaces the budget's status (the status subresource, a merge
// patch: lists such as conditions are replaced whole).
func (w *statusWriter) write(ctx context.Context, name string, st telemetryv1alpha1.PowerBudgetStatus) error {
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	_, err = w.client.Resource(Resource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	return err
}

// StatusOf is a domain's status at now. Conditions keep their last
// transition time from the budget's current status while their status
// holds.
func StatusOf(dom *Domain, now time.Time) telemetryv1alpha1.PowerBudgetStatus {
	measured, reserved := int64(math.Round(dom.MeasuredWatts)), RoundUp(dom.ReservedWatts)
	headroom := dom.LimitWatts() - measured - reserved
	st := telemetryv1alpha1.PowerBudgetStatus{
		ObservedGeneration: dom.Generation,
		UpdateTime:         &metav1.Time{Time: now.Truncate(time.Second)},
		MeasuredWatts:      &measured, ReservedWatts: &reserved, HeadroomWatts: &headroom,
		Nodes: dom.Nodes, NodesWithoutPower: dom.NodesWithoutPower,
		PowerSources: dom.PowerSources().List(),
	}
	st.Conditions = append(st.Conditions, dom.Status.Conditions...)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonMeasured, ObservedGeneration: dom.Generation,
		Message: fmt.Sprintf("every one of the %d nodes has fresh power telemetry and a power curve", dom.Nodes)}
	switch without := dom.NodesWithoutPower + dom.NodesWithoutEstimate; {
	case dom.Nodes == 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonNoNodes, "the nodeSelector picks no node"
	case without > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, ReasonNodesWithoutPower
		ready.Message = fmt.Sprintf("%d of %d nodes have no fresh power telemetry and %d no power curve to estimate a pod's watts", dom.NodesWithoutPower, dom.Nodes, dom.NodesWithoutEstimate)
		if dom.HasUnmetered {
			ready.Message += fmt.Sprintf("; they count %dW each (unmeteredNodeWatts)", dom.UnmeteredNodeWatts)
		} else {
			ready.Message += "; they count their last measured watts and take no pods (unmeteredNodeWatts is unset)"
		}
	}
	// Over budget is what the feed sees: measured watts past budgetWatts.
	// Reserved watts are the scheduler's estimate of pods placed since
	// their nodes' samples, which may count a pod a second time until a
	// sample taken well after it started retires it; they keep headroom
	// conservative, and are no reason to page anyone.
	over := metav1.Condition{Type: ConditionOverBudget, Status: metav1.ConditionFalse, Reason: ReasonWithinBudget, ObservedGeneration: dom.Generation}
	if measured > dom.BudgetWatts {
		over.Status, over.Reason = metav1.ConditionTrue, ReasonOverBudget
	}
	over.Message = fmt.Sprintf("measured %dW of budgetWatts %dW; headroom for pods %dW = budget %dW - reserve %dW - measured %dW - reserved %dW",
		measured, dom.BudgetWatts, headroom, dom.BudgetWatts, dom.ReserveWatts, measured, reserved)
	for _, c := range []metav1.Condition{ready, over, SourcesCondition(dom)} {
		c.LastTransitionTime = metav1.Time{Time: now.Truncate(time.Second)}
		if old := meta.FindStatusCondition(st.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		meta.SetStatusCondition(&st.Conditions, c)
		// SetStatusCondition keeps the old message and time only when the
		// status holds; set them as computed.
		*meta.FindStatusCondition(st.Conditions, c.Type) = c
	}
	return st
}
