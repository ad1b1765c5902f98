// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package descheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"github.com/telesched/telesched/apis/config"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/energyaware"
	"github.com/telesched/telesched/scheduler/plugins/loadaware"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// PodsOnNode lists the pods bound to a node.
type PodsOnNode func(node string) ([]*v1.Pod, error)

// Checker finds a pod a destination now: a node other than its own that
// is Ready and schedulable, whose NoSchedule/NoExecute taints the pod
// tolerates, that its required node affinity and nodeSelector pick, where
// its requests fit beside the node's pods (kube-scheduler's NodeResourcesFit
// predicate, noderesources.Fits) and which telesched's LoadAware and
// EnergyAware filters pass, read from the same telemetry cache and
// estimate book as the scheduler's, with the scheduler's args
// (PluginArgsFrom). Among the
// nodes that pass, it names the one with the most thermal headroom.
type Checker struct {
	nodes   corelisters.NodeLister
	pods    PodsOnNode
	cache   *telemetry.Cache
	filters []filter
}

// filter is one telesched scheduler plugin's PreFilter and Filter.
type filter interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

// NewChecker returns a Checker over nodes and the pods on them, with
// LoadAware and EnergyAware built from la and ea on cache and book.
func NewChecker(nodes corelisters.NodeLister, pods PodsOnNode, cache *telemetry.Cache, book *estimate.Book, la config.LoadAwareArgs, ea config.EnergyAwareArgs) *Checker {
	return &Checker{
		nodes: nodes, pods: pods, cache: cache,
		filters: []filter{loadaware.NewWith(la, cache, book), energyaware.NewWith(ea, cache, book)},
	}
}

// Destination is where pod could go now, other than its node: the node's
// name, or "" and why no node will take it. planned are pods that this
// cycle has already sent to a node (by name): they count there.
func (c *Checker) Destination(ctx context.Context, pod *v1.Pod, planned map[string][]*v1.Pod) (string, string) {
	return c.DestinationOutside(ctx, pod, planned, nil)
}

// DestinationOutside is Destination among the nodes exclude does not
// refuse (nil: none), each refused one counted with reason exclude gives.
func (c *Checker) DestinationOutside(ctx context.Context, pod *v1.Pod, planned map[string][]*v1.Pod, exclude func(node string) string) (string, string) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return "", fmt.Sprintf("listing nodes: %v", err)
	}
	p := pod.DeepCopy()
	p.Spec.NodeName = ""
	cs := framework.NewCycleState()
	var active []filter
	for _, f := range c.filters {
		_, st := f.PreFilter(ctx, cs, p, nil)
		switch {
		case st.IsSkip():
		case !st.IsSuccess():
			return "", fmt.Sprintf("%s: %s", f.Name(), st.Message())
		default:
			active = append(active, f)
		}
	}
	type fit struct {
		name     string
		headroom int64
	}
	var fits []fit
	why := map[string]int{}
	for _, n := range nodes {
		if n.Name == pod.Spec.NodeName {
			continue
		}
		if exclude != nil {
			if reason := exclude(n.Name); reason != "" {
				why[reason]++
				continue
			}
		}
		if reason := c.refuses(ctx, cs, p, n, planned[n.Name], active); reason != "" {
			why[reason]++
			continue
		}
		h := int64(-1) // no headroom known: ranked after every node with some
		if tel, ok := c.cache.Get(n.Name); ok && tel.HasThermal && tel.HasHeadroom {
			h = tel.HeadroomMilli
		}
		fits = append(fits, fit{n.Name, h})
	}
	if len(fits) == 0 {
		return "", "0/" + fmt.Sprint(len(nodes)) + " nodes: " + summarize(why)
	}
	best := slices.MinFunc(fits, func(a, b fit) int {
		if c := cmp.Compare(b.headroom, a.headroom); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return best.name, ""
}

// refuses says why node n cannot take pod p now, "" when it can.
func (c *Checker) refuses(ctx context.Context, cs fwk.CycleState, p *v1.Pod, n *v1.Node, planned []*v1.Pod, active []filter) string {
	if n.Spec.Unschedulable {
		return "node is unschedulable"
	}
	if !ready(n) {
		return "node is not Ready"
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.FromContext(ctx), n.Spec.Taints, p.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false); untolerated {
		return "untolerated taint"
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok {
		return "node affinity/selector does not match"
	}
	pods, err := c.pods(n.Name)
	if err != nil {
		return "listing pods: " + err.Error()
	}
	ni := framework.NewNodeInfo(append(slices.Clone(pods), planned...)...)
	ni.SetNode(n)
	if insufficient := noderesources.Fits(p, ni, nil, noderesources.ResourceRequestsOptions{}); len(insufficient) > 0 {
		return "insufficient " + string(insufficient[0].ResourceName)
	}
	for _, f := range active {
		if st := f.Filter(ctx, cs, p, ni); !st.IsSuccess() {
			return f.Name() + " refuses"
		}
	}
	return ""
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// summarize is why nodes refused, as kube-scheduler words it: "2 node is
// unschedulable, 1 EnergyAware refuses", sorted.
func summarize(why map[string]int) string {
	var parts []string
	for reason, n := range why {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "no other node"
	}
	return strings.Join(parts, ", ")
}
