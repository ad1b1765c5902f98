// Package loadaware is the LoadAware plugin: it filters out nodes whose
// estimated CPU or memory utilization would exceed a threshold and scores
// nodes by it, spreading load (Spread) or consolidating it (Pack).
// Estimated = measured by the node's agent + the requests of the pods placed
// on the node since its sample + this pod, so a burst of pods does not pile
// onto the node that looked idle.
package loadaware

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/validation"
	"github.com/telesched/telesched/scheduler/plugins/internal/cyclestate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
	"github.com/telesched/telesched/scheduler/plugins/internal/pluginfactory"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "LoadAware"

const stateKey fwk.StateKey = "PreFilter" + Name

// LoadAware is the plugin.
type LoadAware struct {
	args  config.LoadAwareArgs
	cache *telemetry.Cache
	now   func() time.Time
	last  cyclestate.Last[*podState]
	// lowered is the set of nodes whose annotations lower a threshold, nil
	// until WatchNodes: without it, any node may have a lower threshold.
	lowered *nodeset.Set
}

var (
	_ fwk.PreFilterPlugin   = &LoadAware{}
	_ fwk.FilterPlugin      = &LoadAware{}
	_ fwk.PreScorePlugin    = &LoadAware{}
	_ fwk.ScorePlugin       = &LoadAware{}
	_ fwk.ScoreExtensions   = &LoadAware{}
	_ fwk.ReservePlugin     = &LoadAware{}
	_ fwk.EnqueueExtensions = &LoadAware{}
)

// NewFactory returns the plugin factory; every profile's instance shares
// cache, which the first instance starts and syncs. Each instance follows
// Nodes and Pods through the scheduler's informers (see Watch).
func NewFactory(cache *telemetry.Cache) frameworkruntime.PluginFactory {
	return pluginfactory.New(Name, cache, validation.ValidateLoadAwareArgs, func(args config.LoadAwareArgs, h fwk.Handle) (fwk.Plugin, error) {
		pl := New(args, cache, time.Now)
		if err := pl.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		return pl, nil
	})
}

// New returns the plugin for valid args.
func New(args config.LoadAwareArgs, cache *telemetry.Cache, now func() time.Time) *LoadAware {
	return &LoadAware{args: args, cache: cache, now: now}
}

// Name implements fwk.Plugin.
func (pl *LoadAware) Name() string { return Name }

// podState is what the plugin knows of the pod being scheduled. It is not
// modified after PreFilter/PreScore writes it, so Clone returns it as is.
type podState struct {
	cpuMilli, memoryBytes int64 // requests, scaled
	// now is the cycle's time, read once: telemetry freshness is judged
	// against it for every node.
	now time.Time
	// verbose is whether Filter logs each node that fits (-v=5), decided
	// once per cycle rather than by a context lookup per node.
	verbose bool
}

func (s *podState) Clone() fwk.StateData { return s }

// podRequests is the CPU and memory the pod will add to its node: its
// requests (the kube-scheduler's non-zero defaults for containers without
// any), scaled by the args.
func (pl *LoadAware) podRequests(pod *v1.Pod) *podState {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		NonMissingContainerRequests: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(pl.args.DefaultPodCPUMilli, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(pl.args.DefaultPodMemoryBytes, resource.BinarySI),
		},
	})
	return &podState{
		cpuMilli:    req.Cpu().MilliValue() * int64(pl.args.PodCPUScalingPercent) / 100,
		memoryBytes: req.Memory().Value() * int64(pl.args.PodMemoryScalingPercent) / 100,
		now:         pl.now(),
	}
}

func (pl *LoadAware) state(cs fwk.CycleState, pod *v1.Pod) *podState {
	if s, ok := pl.last.Read(cs, stateKey); ok {
		return s
	}
	return pl.podRequests(pod)
}

// PreFilter computes the pod's requests once. DaemonSet pods skip the
// filter: they must run on every node, whatever its load. So do pods that
// no node could fail (see mayReject).
func (pl *LoadAware) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if isDaemonSetPod(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := pl.podRequests(pod)
	s.verbose = klog.FromContext(ctx).V(5).Enabled()
	pl.last.Write(cs, stateKey, s)
	if !pl.mayReject(s) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// mayReject reports whether the filter could reject some node for the pod.
// It could not when stale telemetry is not rejected, no node's annotation
// lowers a threshold, and even the most loaded node's estimate (the
// cache's LoadBound) with the pod on the smallest node stays within the
// thresholds: the common case of a fleet with headroom, where skipping the
// filter saves a telemetry lookup per node per pod.
func (pl *LoadAware) mayReject(s *podState) bool {
	if pl.args.StaleTelemetryPolicy == config.StaleTelemetryReject || pl.lowered == nil {
		return true
	}
	if n, ok := pl.lowered.Len(); !ok || n > 0 {
		return true
	}
	b := pl.cache.LoadBound()
	return mayExceed(b.CPUBP, s.cpuMilli, b.MinCPUMilli, pl.args.CPUThresholdPercent) ||
		mayExceed(b.MemoryBP, s.memoryBytes, b.MinMemoryBytes, pl.args.MemoryThresholdPercent)
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects a node whose estimated utilization with the pod exceeds
// its threshold, with the numbers.
func (pl *LoadAware) Filter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	s := pl.state(cs, pod)
	tel, reservedCPU, reservedMem, ok := pl.cache.GetWithReserved(node.Name)
	if !ok || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) {
		return telemetry.StaleStatus(pl.args.TelemetryArgs, tel, s.now)
	}
	if tel.HasCPU {
		limit := threshold(node, config.NodeAnnotationCPUThresholdPercent, pl.args.CPUThresholdPercent)
		est := telemetry.EstimateBP(tel.CPUPercent, reservedCPU+s.cpuMilli, int64(tel.LogicalCores)*1000)
		if est > int64(limit)*100 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node cpu %s percent > threshold %d percent (measured %d, +%s placed since the sample and this pod)",
				percentBP(est), limit, tel.CPUPercent, percentBP(est-int64(tel.CPUPercent)*100)))
		}
	}
	if tel.HasMemory {
		limit := threshold(node, config.NodeAnnotationMemoryThresholdPercent, pl.args.MemoryThresholdPercent)
		est := telemetry.EstimateBP(tel.MemoryPercent, reservedMem+s.memoryBytes, tel.MemoryTotalBytes)
		if est > int64(limit)*100 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node memory %s percent > threshold %d percent (measured %d, +%s placed since the sample and this pod)",
				percentBP(est), limit, tel.MemoryPercent, percentBP(est-int64(tel.MemoryPercent)*100)))
		}
	}
	if s.verbose {
		klog.FromContext(ctx).V(5).Info("LoadAware fits", "pod", klog.KObj(pod), "node", node.Name, "cpuPercent", tel.CPUPercent, "memoryPercent", tel.MemoryPercent)
	}
	return nil
}

// PreScore makes sure the pod's requests are in the cycle state: PreFilter
// put them there unless it was skipped (DaemonSet pods).
func (pl *LoadAware) PreScore(_ context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, ok := pl.last.Read(cs, stateKey); !ok {
		pl.last.Write(cs, stateKey, pl.podRequests(pod))
	}
	return nil
}

// Score ranks a node by its estimated utilization with the pod (the higher
// of CPU and memory).
func (pl *LoadAware) Score(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s := pl.state(cs, pod)
	tel, reservedCPU, reservedMem, ok := pl.cache.GetWithReserved(nodeInfo.Node().Name)
	if !ok || !tel.Fresh(s.now, pl.args.TelemetryMaxAge) || (!tel.HasCPU && !tel.HasMemory) {
		return telemetry.NoTelemetry, nil
	}
	var est int64
	if tel.HasCPU {
		est = telemetry.EstimateBP(tel.CPUPercent, reservedCPU+s.cpuMilli, int64(tel.LogicalCores)*1000)
	}
	if tel.HasMemory {
		est = max(est, telemetry.EstimateBP(tel.MemoryPercent, reservedMem+s.memoryBytes, tel.MemoryTotalBytes))
	}
	if pl.args.ScoringStrategy == config.ScoringStrategyPack {
		return packScore(est, pl.args.PackTargetPercent), nil
	}
	return spreadScore(est), nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives nodes without fresh telemetry the lowest score of
// the nodes with it (0 when none has it).
func (pl *LoadAware) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	telemetry.NormalizeMissing(scores)
	return nil
}

// Reserve counts the pod toward its node until a sample measures it.
func (pl *LoadAware) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s := pl.state(cs, pod)
	pl.cache.Reserve(nodeName, pod.UID, s.cpuMilli, s.memoryBytes, pl.now())
	return nil
}

// Unreserve forgets the pod's reservation.
func (pl *LoadAware) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.cache.Unreserve(nodeName, pod.UID)
}

// EventsToRegister requeues pods this plugin rejected when a node's
// telemetry changes in a way that can let them in.
func (pl *LoadAware) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{{
		Event:          fwk.ClusterEvent{Resource: telemetry.EventResource, ActionType: fwk.Add | fwk.Update},
		QueueingHintFn: pl.hint,
	}}, nil
}

// hint queues a pod when a node's measured CPU or memory fell to its
// threshold or below, or its telemetry became fresh, and skips otherwise.
func (pl *LoadAware) hint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	prev, cur, err := pl.cache.ObserveChange(oldObj, newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("%s: %w", Name, err)
	}
	now := pl.now()
	fits := func(n *telemetry.Node) bool {
		return n != nil && n.Fresh(now, pl.args.TelemetryMaxAge) &&
			(!n.HasCPU || n.CPUPercent <= pl.args.CPUThresholdPercent) &&
			(!n.HasMemory || n.MemoryPercent <= pl.args.MemoryThresholdPercent)
	}
	if fits(cur) && !fits(prev) {
		logger.V(4).Info("node telemetry may make the pod schedulable", "pod", klog.KObj(pod), "node", cur.Name, "plugin", Name)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// threshold is the node's override annotation, else the default.
func threshold(node *v1.Node, annotation string, def int32) int32 {
	if v, ok := node.Annotations[annotation]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= 100 {
			return int32(n)
		}
	}
	return def
}

func isDaemonSetPod(pod *v1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// percentBP renders basis points as a percentage number, e.g. 9125 as
// "91.25". Rejection reasons never carry a percent sign: kube-scheduler
// passes them to Eventf as a format string.
func percentBP(bp int64) string {
	if bp%100 == 0 {
		return fmt.Sprintf("%d", bp/100)
	}
	return fmt.Sprintf("%d.%02d", bp/100, bp%100)
}
