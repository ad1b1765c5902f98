// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// Event reasons on an evicted (or not evicted) pod.
const (
	// ReasonEvicted: evicted, destination checked.
	ReasonEvicted = "TeleschedEvicted"
	// ReasonWouldEvict: --dry-run; would have been evicted.
	ReasonWouldEvict = "TeleschedWouldEvict"
	// ReasonNoDestination: chosen, but no node takes it now: not evicted.
	ReasonNoDestination = "TeleschedNoDestination"
	// ReasonEvictionRefused: the Eviction API refused it (a PDB); not
	// retried within the cool-down.
	ReasonEvictionRefused = "TeleschedEvictionRefused"
)

// ReportingController is the controller the descheduler's Events name.
const ReportingController = "telesched-descheduler"

// DefaultCooldown is how long a pod, once evicted (or refused by its
// PodDisruptionBudget, or reported in dry-run), is left alone: longer than
// a few cycles at the default --interval, so one hot spell never moves
// the same pod twice and a PDB that refuses is not asked again every
// cycle. --cooldown changes it.
const DefaultCooldown = 10 * time.Minute

// Gate is the last step of every eviction: it keeps the cool-down, asks
// the framework's evictor (upstream's PodEvictor: dry-run, the per-node and
// per-cycle limits, the Eviction API, so PDBs) and says on the pod what
// happened and where it may go.
type Gate struct {
	recorder events.EventRecorder
	cooldown time.Duration
	dryRun   bool
	now      func() time.Time

	mu     sync.Mutex
	recent map[string]time.Time // pod key → when it was last acted on
}

// NewGate returns a gate that records Events with recorder.
func NewGate(recorder events.EventRecorder, cooldown time.Duration, dryRun bool, now func() time.Time) *Gate {
	return &Gate{recorder: recorder, cooldown: cooldown, dryRun: dryRun, now: now, recent: map[string]time.Time{}}
}

// keys are what the cool-down knows a pod by: its UID, and its namespace
// and name (a StatefulSet's pod comes back with the same name, a new UID).
func keys(pod *v1.Pod) [2]string {
	return keysOf(pod.UID, pod.Namespace, pod.Name)
}

func keysOf(uid types.UID, namespace, name string) [2]string {
	return [2]string{"uid/" + string(uid), "name/" + namespace + "/" + name}
}

// Cooling reports whether pod was acted on within the cool-down.
func (g *Gate) Cooling(pod *v1.Pod) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for _, k := range keys(pod) {
		if t, ok := g.recent[k]; ok {
			if now.Sub(t) < g.cooldown {
				return true
			}
			delete(g.recent, k)
		}
	}
	return false
}

func (g *Gate) remember(pod *v1.Pod) {
	g.rememberAt(keys(pod), g.now())
}

// rememberAt records keys as acted on at t, and forgets every pod whose
// cool-down has ended, so the record holds the pods of one cool-down at
// most.
func (g *Gate) rememberAt(ks [2]string, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if now.Sub(t) >= g.cooldown {
		return
	}
	for k, at := range g.recent {
		if now.Sub(at) >= g.cooldown {
			delete(g.recent, k)
		}
	}
	for _, k := range ks {
		if at, ok := g.recent[k]; !ok || t.After(at) {
			g.recent[k] = t
		}
	}
}

// Remembered is the number of keys the cool-down holds.
func (g *Gate) Remembered() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.recent)
}

// Recall fills the cool-down from the Events the descheduler recorded
// (TeleschedEvicted, TeleschedWouldEvict, TeleschedEvictionRefused) within
// it: a replica that starts leading leaves alone the pods its predecessor
// acted on. It returns how many pods it recalled.
func (g *Gate) Recall(ctx context.Context, client kubernetes.Interface) (int, error) {
	n := 0
	for _, reason := range []string{ReasonEvicted, ReasonWouldEvict, ReasonEvictionRefused} {
		list, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return n, err
		}
		for _, e := range list.Items {
			if e.ReportingController != ReportingController || e.Regarding.Kind != "Pod" {
				continue
			}
			at := e.EventTime.Time
			if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
				at = e.Series.LastObservedTime.Time
			}
			if at.IsZero() {
				continue
			}
			g.rememberAt(keysOf(e.Regarding.UID, e.Regarding.Namespace, e.Regarding.Name), at)
			n++
		}
	}
	return n, nil
}

// NoDestination reports that plugin chose pod but no node takes it.
func (g *Gate) NoDestination(pod *v1.Pod, plugin, why, notDestination string) {
	evictionsTotal.WithLabelValues(plugin, ResultNoDestination).Inc()
	g.recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonNoDestination, "Deschedule",
		"%s: %s; not evicted: no destination: %s", plugin, why, notDestination)
}

// Evict evicts pod (in dry-run: reports it) for plugin, because of why,
// towards dest, a node the Checker found; the result is one of the
// Result* constants.
func (g *Gate) Evict(ctx context.Context, ev frameworktypes.Evictor, plugin string, pod *v1.Pod, dest *v1.Node, why string) string {
	logger := klog.FromContext(ctx)
	err := ev.Evict(ctx, pod, evictions.EvictOptions{Reason: plugin, StrategyName: plugin, ProfileName: plugin})
	result := classify(err, g.dryRun)
	evictionsTotal.WithLabelValues(plugin, result).Inc()
	switch result {
	case ResultEvicted:
		g.remember(pod)
		g.recorder.Eventf(pod, dest, v1.EventTypeNormal, ReasonEvicted, "Evict",
			"%s: %s; evicted from %s, destination %s (checked)", plugin, why, pod.Spec.NodeName, dest.Name)
	case ResultWouldEvict:
		g.remember(pod)
		g.recorder.Eventf(pod, dest, v1.EventTypeNormal, ReasonWouldEvict, "Evict",
			"%s: %s; dry run: would evict from %s, destination %s (checked)", plugin, why, pod.Spec.NodeName, dest.Name)
	case ResultRefusedPDB:
		// Not asked again within the cool-down: a PDB that allows no
		// disruption now is not hammered every cycle.
		g.remember(pod)
		g.recorder.Eventf(pod, dest, v1.EventTypeWarning, ReasonEvictionRefused, "Evict",
			"%s: %s; eviction from %s refused (not retried for %s): %v", plugin, why, pod.Spec.NodeName, g.cooldown, err)
	}
	logger.V(2).Info("Eviction", "plugin", plugin, "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "destination", dest.Name, "result", result, "reason", why, "err", err)
	return result
}

// classify maps the framework evictor's answer to a result. Upstream's
// PodEvictor (evictions.go, EvictPod) returns typed errors for its limits,
// and wraps the Eviction API's 429 Too Many Requests, which a
// PodDisruptionBudget that allows no disruption answers, with %v as
// "error when evicting pod (ignoring)", so only its text tells it apart.
func classify(err error, dryRun bool) string {
	var perNode *evictions.EvictionNodeLimitError
	var total *evictions.EvictionTotalLimitError
	var perNS *evictions.EvictionNamespaceLimitError
	switch {
	case err == nil && dryRun:
		return ResultWouldEvict
	case err == nil:
		return ResultEvicted
	case errors.As(err, &perNode), errors.As(err, &total), errors.As(err, &perNS):
		return ResultRateLimited
	case strings.Contains(err.Error(), "error when evicting pod (ignoring)"):
		return ResultRefusedPDB
	default:
		return ResultError
	}
}
