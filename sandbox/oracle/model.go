// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/estimate"
)

// oracle is one problem: the nodes (sorted by name), the pods and the
// racks' budgets by index, the rules' constants, and the nodes' watts
// memoized by load.
type oracle struct {
	opts      Options
	nodes     []oNode
	pods      []oPod
	budgets   []oBudget
	threshold float64 // LoadAware's CPU threshold, 0..1
	marginC   float64 // EnergyAware's thermal margin, °C
	memo      map[wattsKey]float64
	joules    map[joulesKey]float64
	profiles  map[string]int // MIG profile -> index of oNode.migFree, oLoad.mig
	// slices are each profile's compute slices (its leading "<n>g").
	slices  []int
	horizon float64
}

// oNode is a node and its capacities. gpus are the units of the GPU
// resource (whole GPUs; MIG devices on the single strategy), gpusOn those
// per NUMA node, unitShare the share of a GPU each takes busy; migFree
// are MIG devices per profile index (mixed strategy), migShare each's
// share; pairs the NVLink pairs of a node of pairs; claimable the GPUs a
// DRA claim may take.
type oNode struct {
	spec      sim.NodeSpec // with defaults
	capMilli  int64
	memBytes  int64
	numa      int
	gpusOn    []int
	gpus      int
	unitShare float64
	migFree   []int
	migShare  []float64
	pairs     int
	lone      int  // whole GPUs in no pair
	linkPairs bool // a pod of 2 GPUs needs a pair
	claimable int
	hasGPU    bool
	budgets   []int
}

// oPod is a pod's requests and the nodes closed to it.
type oPod struct {
	name               string
	cpuMilli, memBytes int64
	gpus, claims       int
	mig                []int  // per profile index; nil for none
	units              string // mig, claims and work, to tell pods apart
	singleNUMA         bool
	closed             []int // nodes it may not go to (Closure, Pod.Node)
	// seconds is a finite pod's work in seconds on the reference (0: a
	// service); asked the reference GPUs it asks for (a whole GPU each, a
	// MIG device its profile's slices over estimate.ReferenceComputeSlices).
	seconds float64
	asked   float64
}

// cpuPod: a pod without GPUs (the CPU pods of the report).
func (p *oPod) cpuPod() bool { return p.gpus == 0 && p.mig == nil && p.claims == 0 }

// finite: a pod of a fixed amount of work.
func (p *oPod) finite() bool { return p.seconds > 0 }

// big: a pod the lower bound places one by one (the others are service
// CPU pods whose CPUs it spreads).
func (p *oPod) big() bool { return !p.cpuPod() || p.singleNUMA || p.finite() }

// oBudget is a rack's limit (budget - reserve) and its nodes.
type oBudget struct {
	limit float64
	nodes []int
}

// oLoad is what a node runs. svcMilli are its services' CPU requests
// (svcCPUPodMilli those of its CPU pods), svcGPU its services with GPUs
// and finite its finite pods (indexes, ascending).
type oLoad struct {
	svcMilli, svcCPUPodMilli        int64
	svcGPU, finite                  []int
	cpuMilli, cpuPodMilli, memBytes int64
	gpus, pods                      int
	mig                             []int   // MIG devices per profile index
	claims, pairPods                int     // DRA claims' GPUs; pods of 2 GPUs
	pinnedMilli, pinnedMem          []int64 // per NUMA node: its single-NUMA pods'
	pinnedGPUs                      []int
}

func (l oLoad) clone() oLoad {
	l.finite = append([]int(nil), l.finite...)
	l.svcGPU = append([]int(nil), l.svcGPU...)
	l.mig = append([]int(nil), l.mig...)
	l.pinnedMilli = append([]int64(nil), l.pinnedMilli...)
	l.pinnedMem = append([]int64(nil), l.pinnedMem...)
	l.pinnedGPUs = append([]int(nil), l.pinnedGPUs...)
	return l
}

type wattsKey struct {
	node     int
	cpuMilli float64
	busy     float64
}

type joulesKey struct {
	node     int
	svcMilli int64
	pods     string // the services with GPUs and the finite pods
}

func newOracle(fleet Fleet, pods []Pod, opts Options) *oracle {
	o := &oracle{
		opts:      opts,
		threshold: float64(configv1.DefaultLoadAwareArgs().CPUThresholdPercent) / 100,
		marginC:   float64(configv1.DefaultEnergyAwareArgs().ThermalMarginCelsius),
		memo:      map[wattsKey]float64{},
		joules:    map[joulesKey]float64{},
		profiles:  map[string]int{},
		horizon:   opts.Horizon,
	}
	if o.horizon <= 0 {
		o.horizon = DefaultHorizon
	}
	specs := append([]sim.NodeSpec(nil), fleet.Nodes...)
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	for _, s := range specs {
		for _, g := range s.GPUs {
			for _, d := range g.MIG {
				o.profile(migKey(s.DRA, d.Profile))
			}
		}
	}
	pods = slices.Clone(pods) // the caller's, with ClaimMIG moved into MIG below
	for i, p := range pods {
		if len(p.ClaimMIG) > 0 {
			mig := maps.Clone(p.MIG)
			if mig == nil {
				mig = map[string]int{}
			}
			for pr, c := range p.ClaimMIG {
				mig[migKey(true, pr)] += c
			}
			pods[i].MIG = mig
		}
	}
	for _, p := range pods {
		for _, pr := range sortedKeys(p.MIG) {
			o.profile(pr)
		}
	}
	for _, s := range specs {
		o.nodes = append(o.nodes, o.newNode(s.WithDefaults()))
	}
	for _, b := range fleet.Budgets {
		ob := oBudget{limit: float64(b.BudgetWatts - b.ReserveWatts)}
		for i := range o.nodes {
			if o.nodes[i].spec.Rack == b.Rack {
				ob.nodes = append(ob.nodes, i)
				o.nodes[i].budgets = append(o.nodes[i].budgets, len(o.budgets))
			}
		}
		o.budgets = append(o.budgets, ob)
	}
	for _, p := range pods {
		op := oPod{name: p.Name, cpuMilli: p.CPUMilli, memBytes: p.MemoryBytes, gpus: p.GPUs, claims: p.ClaimGPUs, singleNUMA: p.SingleNUMA,
			seconds: max(0, p.Seconds), asked: float64(p.GPUs + p.ClaimGPUs)}
		for _, pr := range sortedKeys(p.MIG) {
			if p.MIG[pr] > 0 {
				if op.mig == nil {
					op.mig = make([]int, len(o.profiles))
				}
				op.mig[o.profiles[pr]] += p.MIG[pr]
				op.asked += float64(p.MIG[pr]*o.slices[o.profiles[pr]]) / estimate.ReferenceComputeSlices
			}
		}
		op.units = fmt.Sprint(op.mig, op.claims, op.seconds)
		for n := range o.nodes {
			if p.Node != "" && o.nodes[n].spec.Name != p.Node {
				op.closed = append(op.closed, n)
			}
		}
		for _, c := range opts.Closed {
			if c.Phase != p.Phase {
				continue
			}
			for n := range o.nodes {
				if o.nodes[n].spec.Name == c.Node && !slices.Contains(op.closed, n) {
					op.closed = append(op.closed, n)
				}
			}
		}
		slices.Sort(op.closed)
		o.pods = append(o.pods, op)
	}
	return o
}

func (o *oracle) emptyLoad(n int) oLoad {
	k := o.nodes[n].numa
	return oLoad{pinnedMilli: make([]int64, k), pinnedMem: make([]int64, k), pinnedGPUs: make([]int, k)}
}

// with is l with pod p added at NUMA node k (sign 1; k < 0: not pinned)
// or removed from it (sign -1).
func (o *oracle) with(l oLoad, p, k int, sign int64) oLoad {
	l = l.clone()
	pod := &o.pods[p]
	switch {
	case pod.finite():
		l.finite = withIndex(l.finite, p, sign)
	default:
		l.svcMilli += sign * pod.cpuMilli
		if pod.cpuPod() {
			l.svcCPUPodMilli += sign * pod.cpuMilli
		} else {
			l.svcGPU = withIndex(l.svcGPU, p, sign)
		}
	}
	l.cpuMilli += sign * pod.cpuMilli
	l.memBytes += sign * pod.memBytes
	l.gpus += int(sign) * pod.gpus
	l.claims += int(sign) * pod.claims
	if pod.gpus == 2 {
		l.pairPods += int(sign)
	}
	if pod.mig != nil {
		if l.mig == nil {
			l.mig = make([]int, len(o.profiles))
		}
		for i, c := range pod.mig {
			l.mig[i] += int(sign) * c
		}
	}
	l.pods += int(sign)
	if pod.cpuPod() {
		l.cpuPodMilli += sign * pod.cpuMilli
	}
	if k >= 0 {
		l.pinnedMilli[k] += sign * pod.cpuMilli
		l.pinnedMem[k] += sign * pod.memBytes
		l.pinnedGPUs[k] += int(sign) * pod.gpus
	}
	return l
}

// withIndex is the ascending list s with p added (sign 1) or removed.
func withIndex(s []int, p int, sign int64) []int {
	i, ok := slices.BinarySearch(s, p)
	if sign > 0 {
		return slices.Insert(s, i, p)
	}
	if ok {
		return slices.Delete(s, i, i+1)
	}
	return s
}

// utilization is node n's CPU utilization running cpuMilli of requests.
func (o *oracle) utilization(n int, cpuMilli int64) float64 {
	return o.nodes[n].spec.BaseUtilization + float64(cpuMilli)/float64(o.nodes[n].capMilli)
}

// fits reports whether node n can run l, by its own constraints (the
// racks' budgets apart); a node without pods always can, as a node past
// LoadAware's threshold or EnergyAware's limit with its own load only
// gets no pods. Without memory, the memory requests are not checked (the
// lower bound's relaxation).
func (o *oracle) fits(n int, l *oLoad, memory bool) bool {
	node := &o.nodes[n]
	if l.pods == 0 {
		return true
	}
	if l.cpuMilli > node.capMilli || l.gpus > node.gpus || l.claims > node.claimable || (memory && l.memBytes > node.memBytes) {
		return false
	}
	for i, c := range l.mig {
		if c > node.migFree[i] {
			return false
		}
	}
	// A pod of 2 GPUs on a node of NVLink pairs takes a free linked pair;
	// the other pods' GPUs fill the GPUs in no pair, then pairs two by two.
	if node.linkPairs && l.pairPods > 0 && l.pairPods > node.pairs-(max(0, l.gpus-2*l.pairPods-node.lone)+1)/2 {
		return false
	}
	u := o.utilization(n, l.cpuMilli)
	if u > o.threshold+1e-9 {
		return false
	}
	var pinnedCPU, pinnedMem int64
	for k := range node.numa {
		pinnedCPU += l.pinnedMilli[k]
		pinnedMem += l.pinnedMem[k]
	}
	k64 := int64(node.numa)
	for k := range node.numa {
		// A NUMA node's share of CPUs (memory) takes its pinned pods' and
		// an even share of the rest: numa × pinned + rest <= capacity.
		if l.pinnedGPUs[k] > node.gpusOn[k] || k64*l.pinnedMilli[k]+l.cpuMilli-pinnedCPU > node.capMilli ||
			(memory && k64*l.pinnedMem[k]+l.memBytes-pinnedMem > node.memBytes) {
			return false
		}
	}
	limit := float64(node.spec.Host.CritMilliCelsius)/1000 - o.marginC
	if c, _ := node.spec.Steady(math.Min(1, u), 0); c >= limit {
		return false
	}
	return true
}

// watts are node n's true steady watts running l, every pod at once (its
// services at their requests over its speed, its finite pods at their
// requests), which the racks' budgets hold; and the objective's share:
// the joules node n spends for l's work (Joules), or its CPU pods' alone.
func (o *oracle) watts(n int, l *oLoad) (all, cost float64) {
	load := o.serviceLoad(n, l, false)
	if o.opts.Queue {
		// One finite pod at a time: the most the node draws is its
		// services' with the costliest of them.
		all = o.nodeWatts(n, load.CPUMilli, load.Busy)
		for _, p := range l.finite {
			r := o.finiteRun(n, p, 0)
			all = max(all, o.nodeWatts(n, load.CPUMilli+r.CPUMilli, load.Busy+r.Busy))
		}
		return all, o.nodeJoules(n, l, o.opts.CPUPodsObjective)
	}
	for _, p := range l.finite {
		r := o.finiteRun(n, p, 0)
		load.CPUMilli += r.CPUMilli
		load.Busy += r.Busy
	}
	all = o.nodeWatts(n, load.CPUMilli, load.Busy)
	return all, o.nodeJoules(n, l, o.opts.CPUPodsObjective)
}

// queueStarts are, with Options.Queue, the starts (seconds) of node n's
// finite pods of l: each when the one before it (in the pods' order)
// ends; nil without Queue.
func (o *oracle) queueStarts(n int, l *oLoad) map[int]float64 {
	if !o.opts.Queue || len(l.finite) == 0 {
		return nil
	}
	starts := make(map[int]float64, len(l.finite))
	var at float64
	for _, p := range l.finite {
		starts[p] = at
		at += o.finiteRun(n, p, 0).Seconds
	}
	return starts
}

// serviceLoad is what node n's services of l keep busy: their CPU
// requests over its CPU speed and, for those with GPUs, serviceBusy;
// cpuOnly, its CPU pods' alone.
func (o *oracle) serviceLoad(n int, l *oLoad, cpuOnly bool) sim.Run {
	if cpuOnly {
		return sim.Run{CPUMilli: float64(l.svcCPUPodMilli) / o.nodes[n].spec.CPUPace()}
	}
	r := sim.Run{CPUMilli: float64(l.svcMilli) / o.nodes[n].spec.CPUPace()}
	for _, p := range l.svcGPU {
		r.Busy += o.serviceBusy(n, p)
	}
	return r
}

// finiteRun is what finite pod p keeps busy on node n, at its requests,
// and for how long from start: its work over its pace there.
func (o *oracle) finiteRun(n, p int, start float64) sim.Run {
	return sim.Run{CPUMilli: float64(o.pods[p].cpuMilli), Busy: o.podBusy(n, p), Seconds: o.pods[p].seconds / o.pace(n, p), Start: start}
}

// podBusy is what pod p keeps busy on node n at its requests, in whole
// GPUs: each unit of the GPU resource its share, each MIG device its
// profile's, each claimed GPU one (as the simulation's sim.Node.BusyShare).
func (o *oracle) podBusy(n, p int) float64 {
	node, pod := &o.nodes[n], &o.pods[p]
	b := float64(pod.gpus)*node.unitShare + float64(pod.claims)
	for i, c := range pod.mig {
		b += float64(c) * node.migShare[i]
	}
	return b
}

// serviceBusy is what a service pod p with GPUs keeps busy on node n:
// the reference GPUs it asks for over the node's GPU speed, no more than
// its devices (a service that asks more of them than they do falls
// behind: the energy then counts what they do).
func (o *oracle) serviceBusy(n, p int) float64 {
	g := o.nodes[n].spec.GPUPace()
	if g <= 0 {
		return 0
	}
	return min(o.pods[p].asked/g, o.podBusy(n, p))
}

// pace is how many times the reference's work per second node n does for
// pod p: a CPU pod at its CPU cores' speed; a GPU pod at its GPUs' speed
// times the GPUs its devices make up over the reference GPUs it asks
// for (four 1g devices for four GPUs: 4/7 over 4).
func (o *oracle) pace(n, p int) float64 {
	node, pod := &o.nodes[n], &o.pods[p]
	if pod.cpuPod() || pod.asked <= 0 {
		return node.spec.CPUPace()
	}
	return max(node.spec.GPUPace()*o.podBusy(n, p)/pod.asked, 1e-9)
}

// nodeJoules is the energy node n spends running l's work beyond its
// base load (sim.NodeSpec.Joules): its services, keeping their requests
// over its speed busy, for the horizon; each finite pod at its requests
// for its work over its pace. cpuOnly counts its CPU pods alone.
func (o *oracle) nodeJoules(n int, l *oLoad, cpuOnly bool) float64 {
	svc := l.svcMilli
	var key []byte
	if cpuOnly {
		svc = l.svcCPUPodMilli
	} else {
		for _, p := range l.svcGPU {
			key = append(key, byte(p), byte(p>>8), byte(p>>16))
		}
	}
	key = append(key, 0xff)
	for _, p := range l.finite {
		if !cpuOnly || o.pods[p].cpuPod() {
			key = append(key, byte(p), byte(p>>8), byte(p>>16))
		}
	}
	k := joulesKey{n, svc, string(key)}
	if j, ok := o.joules[k]; ok {
		return j
	}
	j := o.nodeJoulesFrom(n, l, cpuOnly, o.queueStarts(n, l))
	o.joules[k] = j
	return j
}

// nodeJoulesFrom is nodeJoules with each finite pod started at starts
// (seconds; absent: 0), unmemoized.
func (o *oracle) nodeJoulesFrom(n int, l *oLoad, cpuOnly bool, starts map[int]float64) float64 {
	var runs []sim.Run
	for _, p := range l.finite {
		if cpuOnly && !o.pods[p].cpuPod() {
			continue
		}
		runs = append(runs, o.finiteRun(n, p, starts[p]))
	}
	return o.nodes[n].spec.Joules(o.serviceLoad(n, l, cpuOnly), o.horizon, runs)
}

func (o *oracle) nodeWatts(n int, cpuMilli, busy float64) float64 {
	k := wattsKey{n, cpuMilli, busy}
	if w, ok := o.memo[k]; ok {
		return w
	}
	w := o.nodes[n].spec.EstimatedWattsShare(o.nodes[n].spec.BaseUtilization+cpuMilli/float64(o.nodes[n].capMilli), busy)
	o.memo[k] = w
	return w
}

// allowed reports whether pod p may go to node n at all (the variant's
// rule on CPU pods, and the pod's closures).
func (o *oracle) allowed(p, n int) bool {
	return !(o.opts.CPUPodsOffGPUNodes && o.pods[p].cpuPod() && o.nodes[n].hasGPU) && !slices.Contains(o.pods[p].closed, n)
}

// numaChoices are the NUMA nodes pod p may be pinned to on node n; -1
// alone for a pod without a NUMA policy.
func (o *oracle) numaChoices(p, n int) []int {
	if !o.pods[p].singleNUMA {
		return []int{-1}
	}
	out := make([]int, o.nodes[n].numa)
	for k := range out {
		out[k] = k
	}
	return out
}

// oState is a placement: each pod's node and NUMA node, each node's load,
