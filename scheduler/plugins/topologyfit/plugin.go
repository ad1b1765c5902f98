// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package topologyfit is the TopologyFit plugin: it places pods by the NUMA
// and GPU topology that nodes publish in their NodeTelemetry.
//
// Filter keeps a GPU pod off nodes without enough healthy, unallocated GPUs
// or MIG devices of the model and memory it asks for, and a pod annotated
// telesched.io/numa-policy: single-numa-node off nodes where no single NUMA
// node has its CPUs, memory and GPUs free. Score prefers NUMA-aligned
// placements, then packs GPU pods onto the nodes they fill best, and keeps
// pods that request no GPU off the CPUs a GPU node keeps for its free GPUs.
//
// The rules, in full:
//
//   - GPUs requested: the pod's requests of TopologyFitArgs.GPUResourceName
//     as the kube-scheduler sums them (init containers by their maximum),
//     or its limits when higher (extended resources have requests equal to
//     limits once the API server defaults them). MIG devices requested:
//     likewise, of each resource named TopologyFitArgs.MIGResourcePrefix +
//     a profile (nvidia.com/mig-1g.10gb: NVIDIA's device plugin's mixed
//     MIG strategy). A pod may request at most 4 such resources.
//
//   - Units: what one of a request counts on a node. A MIG resource's are
//     the node's published MIG devices of its profile. The GPU resource's
//     are MIG devices of any profile on a node of the single MIG strategy
//     (all its GPUs in MIG mode, and no MIG resource in its allocatable:
//     the mixed strategy lists its MIG devices there), and elsewhere its
//     GPUs not in MIG mode: a GPU in MIG mode runs no pod of its own.
//     Each unit has its memory (the MIG device's, or the GPU's) and its
//     GPU's model, health and NUMA node.
//
//   - GPU model (telesched.io/gpu-model): a unit matches when its GPU's
//     reported model contains the annotation's value, ASCII letters
//     compared without case, e.g. "h100" matches "NVIDIA H100 80GB HBM3".
//     Empty: any model.
//
//   - GPU memory (telesched.io/gpu-min-memory, a resource.Quantity such as
//     "40Gi"): a unit matches when its memory is at least that (a 1g.10gb
//     MIG device has 10 GB, not its GPU's 80). A value that is not a
//     non-negative quantity makes the pod unschedulable and unresolvable:
//     no cluster event can fix it.
//
//   - Matching units are healthy ones that satisfy both constraints.
//
//   - Held units (holdings, the one place that says so): the units the
//     node's sample shows allocated by the kubelet (the pod-resources API:
//     a GPU's allocated, a MIG profile's allocated), plus the units of the
//     pods placed since the sample: what the node's pods request of the
//     resource (the scheduler's own sum, assumed and nominated pods
//     included) beyond the allocated ones, never below 0. Where the node
//     does not publish every unit's allocation, every requested unit is
//     held that way. The units of pods placed since the sample are assumed
//     to be matching ones: on a node with mixed models or an unhealthy GPU
//     this under-counts, never over-counts, what is free.
//
//   - Which units those pods hold is not published, so for NUMA placement
//     they are assumed to fill units whose NUMA node is unknown first,
//     then NUMA nodes from the lowest id up: what a kubelet that aligns
//     each pod and settles ties on the lowest NUMA node does. Two 4-GPU
//     pods thus fit an 8-GPU node with 4 GPUs per NUMA node; assuming
//     instead that the held GPUs could sit on any NUMA node would leave
//     half of it idle.
//
//   - A GPU whose NUMA node is unknown belongs to no NUMA node, except on a
//     node with a single NUMA node (where sysfs often reports -1).
//
//   - Free CPUs on a NUMA node: see numaFreeCPUMilli. Free memory: the NUMA
//     node's MemFree. Pods placed since the node's sample are not counted
//     in either telemetry figure.
//
//   - Together (Score, a request of k >= 2 units): a node where one NVLink
//     group (nvlink.group: GPUs that reach each other over NVLink, through
//     NVSwitch or not) has k free matching units ranks above one where
//     only a PCIe root (pcieRoot) has them, and that above one where only
//     a NUMA node does (see formula.go). MIG devices have no peer-to-peer
//     at all: k devices of one GPU count as one PCIe root, and devices of
//     several GPUs as nothing together (holding.together). Units held by pods placed since
//     the sample or not published count as held in every group. The
//     kubelet's device plugin picks the node's devices, not the scheduler:
//     this chooses the node only, and a pod that needs NVLink should ask
//     its device plugin for it (the NVIDIA plugin prefers linked GPUs).
//
//   - The GPU-node penalty and reserve for pods that request no GPU
//     (takesGPUReserve) count a node's healthy GPUs, in MIG mode or not,
//     less what its pods request of them in whole GPUs (heldGPUs: MIG
//     devices by their compute slices, rounded up); PowerBudget's
//     powerable GPUs likewise, each at a whole busy GPU's watts.
//
//   - Dynamic Resource Allocation: a pod's ResourceClaims count as GPUs
//     (TopologyFitArgs.GPUDeviceClassNames, GPUDriverNames); GPUs that
//     claims hold are not free; a node whose ResourceSlices publish GPUs
//     is a GPU node. See dra.go.
//
// The annotations telesched.io/gpu-model and telesched.io/gpu-min-memory
// apply to pods that request GPUs or MIG devices only (by extended resource
// or by claim); a numa-policy value other than single-numa-node is ignored.
package topologyfit

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/apis/config/validation"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/cyclestate"
	"github.com/telesched/telesched/scheduler/plugins/internal/nodeset"
	"github.com/telesched/telesched/scheduler/plugins/internal/pluginfactory"
	"github.com/telesched/telesched/scheduler/plugins/internal/podmemo"
	"github.com/telesched/telesched/scheduler/plugins/internal/rejected"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// Name is the plugin's name in the scheduler configuration.
const Name = "TopologyFit"

const stateKey fwk.StateKey = "PreFilter" + Name

// TopologyFit is the plugin.
type TopologyFit struct {
	args        config.TopologyFitArgs
	gpuResource v1.ResourceName
	cache       *telemetry.Cache
	// book is the scheduler's one estimate: the pods placed on each node
	// since its sample, and LoadAware's CPU threshold. Nil: not known.
	book *estimate.Book
	// powerable is how many of a node's free GPUs its PowerBudgets can
	// still power busy (powerbudget.Snapshot.PowerableGPUs), nil without
	// budgets; nodeInfos is the scheduler's snapshot of the nodes, for
	// their free GPUs (nil until NewFactory).
	powerable func(node string, free func(string, *telemetry.Node) int64) (int64, bool)
	nodeInfos fwk.NodeInfoLister
	last      cyclestate.Last[*podState]
	// gpuAllocatable is the set of nodes whose allocatable has the GPU
	// resource; nil until WatchNodes.
	gpuAllocatable *nodeset.Set
	// facts remembers pending pods' podFacts for podDeleteHint, which
	// must not modify them.
	facts *podmemo.Memo[podFactsResult]
	// rejected are the pending pods Filter rejected, with their facts,
	// which a NodeTelemetry change may let in (pick).
	rejected *rejected.Index[*podState]
	// draTracker and draLister are the framework's claims (with the
	// allocations DynamicResources made this cycle) and the informer's,
	// for Reserve and Unreserve (dra.go); nil until NewFactory.
	draTracker claimTracker
	draLister  resourcelisters.ResourceClaimLister
}

type podFactsResult struct {
	s   *podState
	err error
}

// hintFacts is podFacts for podDeleteHint, from the memo: the scheduler
// asks about the same pending pods again and again.
func (pl *TopologyFit) hintFacts(pod *v1.Pod) (*podState, error) {
	r := pl.facts.Get(pod, func(p *v1.Pod) podFactsResult {
		s, err := pl.podFacts(p)
		return podFactsResult{s, err}
	})
	return r.s, r.err
}

var (
	_ fwk.PreFilterPlugin   = &TopologyFit{}
	_ fwk.FilterPlugin      = &TopologyFit{}
	_ fwk.PreScorePlugin    = &TopologyFit{}
	_ fwk.ScorePlugin       = &TopologyFit{}
	_ fwk.ScoreExtensions   = &TopologyFit{}
	_ fwk.EnqueueExtensions = &TopologyFit{}
	_ fwk.ReservePlugin     = &TopologyFit{}
)

// NewFactory returns the plugin factory; every profile's instance shares
// cache, which the first instance starts and syncs. Each instance follows
// Nodes through the scheduler's Node informer (see WatchNodes).
func NewFactory(cache *telemetry.Cache, book *estimate.Book, domains *powerbudget.Domains) frameworkruntime.PluginFactory {
	return pluginfactory.New(Name, cache, validation.ValidateTopologyFitArgs, func(ctx context.Context, args config.TopologyFitArgs, h fwk.Handle) (fwk.Plugin, error) {
		if book == nil {
			book = estimate.NewBook(cache, demandOptions(args))
		}
		if err := book.ShareGPUResource(fmt.Sprintf("profile %s's %s (gpuResourceName)", h.ProfileName(), Name), v1.ResourceName(args.GPUResourceName)); err != nil {
			return nil, err
		}
		if err := book.ShareMIGResourcePrefix(fmt.Sprintf("profile %s's %s (migResourcePrefix)", h.ProfileName(), Name), args.MIGResourcePrefix); err != nil {
			return nil, err
		}
		if err := shareDRA(book, args, h); err != nil { // dra.go
			return nil, err
		}
		pl := NewWith(args, cache, book)
		if domains != nil {
			pl.powerable = func(node string, free func(string, *telemetry.Node) int64) (int64, bool) {
				return domains.Snapshot(cache.Now(), args.TelemetryMaxAge).PowerableGPUs(node, free)
			}
		}
		if m := h.SharedDRAManager(); m != nil {
			pl.draTracker = m.ResourceClaims()
		}
		pl.draLister = h.SharedInformerFactory().Resource().V1().ResourceClaims().Lister()
		if lister := h.SnapshotSharedLister(); lister != nil {
			pl.nodeInfos = lister.NodeInfos()
		}
		if err := pl.WatchNodes(h.SharedInformerFactory().Core().V1().Nodes().Informer()); err != nil {
			return nil, err
		}
		if err := pl.rejected.Watch(h.SharedInformerFactory()); err != nil {
			return nil, err
		}
		pl.rejected.OnTelemetry(ctx, Name, cache, h.SharedInformerFactory(), h, pl.pick)
		return pl, nil
	})
}

// WatchNodes follows which Nodes have the GPU resource in their allocatable
// through the Nodes informer delivers (the scheduler's own), so that
// PreScore knows without a pass over the candidates when no node is a GPU
// node.
func (pl *TopologyFit) WatchNodes(informer toolscache.SharedIndexInformer) error {
	s, err := nodeset.Watch(informer, func(n *v1.Node) bool {
		q, ok := n.Status.Allocatable[pl.gpuResource]
		return ok && q.Sign() > 0
	})
	if err != nil {
		return err
	}
	pl.gpuAllocatable = s
	return nil
}

// New returns the plugin for valid args, with a reservation book of its
// own that counts GPUs by them. Time is the cache's clock.
func New(args config.TopologyFitArgs, cache *telemetry.Cache) *TopologyFit {
	return NewWith(args, cache, estimate.NewBook(cache, demandOptions(args)))
}

// demandOptions are the default demand options with the args' GPU
// resource.
func demandOptions(args config.TopologyFitArgs) estimate.Options {
	opts := estimate.DefaultOptions()
	opts.GPUResource = v1.ResourceName(args.GPUResourceName)
	opts.MIGResourcePrefix = args.MIGResourcePrefix
	return opts
}

// NewWith returns the plugin for valid args, counting pods' demand by
// book and reading what LoadAware lets a node take from it (see
// takesGPUReserve).
func NewWith(args config.TopologyFitArgs, cache *telemetry.Cache, book *estimate.Book) *TopologyFit {
	return &TopologyFit{args: args, gpuResource: v1.ResourceName(args.GPUResourceName), cache: cache, book: book, facts: podmemo.New[podFactsResult](), rejected: rejected.New[*podState]()}
}

// Name implements fwk.Plugin.
func (pl *TopologyFit) Name() string { return Name }

// podState is what the plugin knows of the pod being scheduled. It is not
// modified after PreFilter/PreScore writes it, so Clone returns it as is.
type podState struct {
	gpus int64 // the GPU resource requested
	// reqs are the GPU resource (first, when requested) and the MIG
	// resources the pod requests, at most maxUnitRequests.
	reqs      []unitRequest
	claimGPUs int64 // GPUs its ResourceClaims hold or ask for (dra.go)
	// claimPending is the GPUs its unallocated claims ask for, counted
	// for a single-numa-node pod only (dra.go).
	claimPending int64
	cpuMilli     int64 // CPU requested
	memoryBytes  int64 // memory requested
	singleNUMA   bool  // telesched.io/numa-policy: single-numa-node

	// GPU constraints, for GPU pods only.
	model          string // lower-cased model substring; "" for any
	minGPUMemory   int64  // bytes; 0 for any
	gpuConstraints string // for messages: ` matching model "H100" with >= 40Gi`

	// now is the cycle's time, read once: telemetry freshness is judged
	// against it for every node.
	now time.Time
	// verbose is whether Filter logs each node that fits (-v=5), decided
	// once per cycle rather than by a context lookup per node.
	verbose bool
}

func (s *podState) Clone() fwk.StateData { return s }

// topology reports whether the plugin has anything to check for the pod.
func (s *podState) topology() bool { return len(s.reqs) > 0 || s.singleNUMA }

// podFacts computes the pod's state. Its error is a malformed annotation,
// which no cluster event can fix.
func (pl *TopologyFit) podFacts(pod *v1.Pod) (*podState, error) {
	s := &podState{singleNUMA: pod.Annotations[config.PodAnnotationNUMAPolicy] == config.NUMAPolicySingleNUMANode}
	// As the book counts them for every plugin (estimate.Counter:
	// kube-scheduler's sums, GPUs the higher of requests and limits),
	// without the default requests: a NUMA node's fit is the kubelet's
	// topology manager's, which counts a container that requests no CPU
	// as none.
	d := pl.book.Requested(pod)
	s.gpus, s.cpuMilli, s.memoryBytes, s.claimGPUs = d.GPUs, d.CPUMilli, d.MemoryBytes, d.ClaimGPUs // claims: dra.go
	if s.gpus > 0 {
		s.reqs = append(s.reqs, unitRequest{resource: pl.gpuResource, count: s.gpus})
	}
	for _, r := range pl.book.MIGRequests(pod) {
		s.reqs = append(s.reqs, unitRequest{resource: r.Resource, profile: r.Profile, count: r.Count})
	}
	if len(s.reqs) > maxUnitRequests {
		return nil, fmt.Errorf("pod requests %d GPU and MIG resources; %s places at most %d", len(s.reqs), Name, maxUnitRequests)
	}
	if len(s.reqs) == 0 && s.claimGPUs == 0 {
		return s, nil
	}
	if s.singleNUMA && s.claimGPUs > 0 {
		s.claimPending = pl.book.Claims().PodPendingGPUs(pod)
	}
	var desc strings.Builder
	if m := strings.TrimSpace(pod.Annotations[config.PodAnnotationGPUModel]); m != "" {
		s.model = lowerASCIIString(m)
		fmt.Fprintf(&desc, " matching model %q", m)
	}
	if v, ok := pod.Annotations[config.PodAnnotationGPUMinMemory]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("pod annotation %s=%q is not a quantity such as \"40Gi\": %w", config.PodAnnotationGPUMinMemory, v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("pod annotation %s=%q must not be negative", config.PodAnnotationGPUMinMemory, v)
		}
		s.minGPUMemory = q.Value()
		if s.minGPUMemory > 0 {
			fmt.Fprintf(&desc, " with >= %s", q.String())
		}
	}
	s.gpuConstraints = desc.String()
	return s, nil
}

// state returns the pod's state from the cycle, or computes it.
func (pl *TopologyFit) state(cs fwk.CycleState, pod *v1.Pod) (*podState, error) {
	if s, ok := pl.last.Read(cs, stateKey); ok {
		return s, nil
	}
	s, err := pl.podFacts(pod)
	if err != nil {
		return nil, err
	}
	s.now = pl.cache.Now()
	return s, nil
}

// missingStatus is Filter's answer for a node whose fresh telemetry lacks
// a section the pod needs (what: "GPU" or "NUMA"), per the stale policy.
func (pl *TopologyFit) missingStatus(what string) *fwk.Status {
	if pl.args.StaleTelemetryPolicy != config.StaleTelemetryReject {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node telemetry has no %s data (staleTelemetryPolicy Reject)", what))
}
