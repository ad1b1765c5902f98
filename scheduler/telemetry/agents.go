// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Agent readiness as liveness.
//
// The agent writes its NodeTelemetry whenever a signal moves past its
// deadband, and otherwise once a heartbeat. The heartbeat only says the
// agent is alive; the kubelet already says so for free, through the agent
// pod's readiness probe, which fails once the agent stops sampling or its
// writes fail (the kubelet's own death turns the pod NotReady through the
// node lifecycle controller). So, as kubelets moved their heartbeat from
// the Node object to a Lease (KEP-589) and write status only on change or
// every 5 minutes, the shipped agent writes a heartbeat every 5 minutes,
// and the scheduler judges a node whose agent pod is Ready fresh for
// DefaultAgentMaxAge, not the plugins' telemetryMaxAge. A node with no
// Ready agent pod in sight (an agent run outside the DaemonSet, a pod the
// selector does not match) keeps telemetryMaxAge.

// DefaultAgentSelector selects the agent's pods (--telemetry-agent-pod-selector):
// the DaemonSet's and the chart's pod label.
const DefaultAgentSelector = "app.kubernetes.io/name=telesched-agent"

// DefaultAgentMaxAge is how old a node's sample may be while its agent pod
// is Ready (--telemetry-max-age-ready-agent): the shipped heartbeat (5m)
// plus a minute for a write delayed by the API server or the publisher's
// backoff, which the agent's readiness tolerates for three intervals.
const DefaultAgentMaxAge = 6 * time.Minute

// SetAgents makes the cache watch the pods that selector selects, in every
// namespace, and judge the telemetry of a node on which one is Ready fresh
// for maxAge (when longer than a plugin's telemetryMaxAge). An empty
// selector turns it off. Call it before Start.
func (c *Cache) SetAgents(selector string, maxAge time.Duration) error {
	if selector != "" {
		if _, err := labels.Parse(selector); err != nil {
			return fmt.Errorf("agent pod selector %q: %w", selector, err)
		}
	}
	if maxAge < 0 {
		return fmt.Errorf("agent max age %v must not be negative", maxAge)
	}
	c.agentSelector, c.agentMaxAge = selector, maxAge
	return nil
}

// AgentEpoch counts changes of any node's agent readiness: a result that
// depends on freshness and was computed at another epoch may be stale.
func (c *Cache) AgentEpoch() uint64 { return c.agentEpoch.Load() }

// ReadyAgents is the number of nodes on which an agent pod is Ready.
func (c *Cache) ReadyAgents() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyAgents
}

// startAgents runs the informer on the agent's pods until ctx ends; the
// caller waits for hasSynced.
func (c *Cache) startAgents(ctx context.Context, cfg *rest.Config) (hasSynced func() bool, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry cache: %w", err)
	}
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = c.agentSelector
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = c.agentSelector
			return pods.Watch(ctx, opts)
		},
	}, &corev1.Pod{}, 0, toolscache.Indexers{})
	// Of a pod, the cache keeps what readiness needs.
	if err := informer.SetTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
			Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
			Status:     corev1.PodStatus{Conditions: readyCondition(p)},
		}, nil
	}); err != nil {
		return nil, err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.agentPod(obj, false) },
		UpdateFunc: func(_, obj any) { c.agentPod(obj, false) },
		DeleteFunc: func(obj any) { c.agentPod(obj, true) },
	}); err != nil {
		return nil, err
	}
	go informer.RunWithContext(ctx)
	return informer.HasSynced, nil
}

func readyCondition(p *corev1.Pod) []corev1.PodCondition {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return []corev1.PodCondition{{Type: cond.Type, Status: cond.Status}}
		}
	}
	return nil
}

func (c *Cache) agentPod(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	ready := false
	if !deleted && p.DeletionTimestamp == nil {
		for _, cond := range p.Status.Conditions {
			ready = ready || cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
		}
	}
	c.SetAgentPod(p.Spec.NodeName, p.UID, ready, deleted)
}

// SetAgentPod records whether an agent pod on node is Ready (gone: it was
// deleted). A node's agent counts as Ready while any of its agent pods is:
// a rolling update may run two for a moment.
func (c *Cache) SetAgentPod(node string, uid types.UID, ready, gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pods := c.agents[node]
	before := anyReady(pods)
	switch {
	case gone:
		delete(pods, uid)
		if len(pods) == 0 {
			delete(c.agents, node)
		}
	case pods == nil:
		c.agents[node] = map[types.UID]bool{uid: ready}
	default:
		pods[uid] = ready
	}
	after := anyReady(c.agents[node])
	if before == after {
		return
	}
	if after {
		c.readyAgents++
	} else {
		c.readyAgents--
	}
	readyAgentNodes.Set(float64(c.readyAgents))
	c.agentEpoch.Add(1)
	if c.agentsSynced.Load() { // the first list is counted in "telemetry cache synced"
		klog.V(2).InfoS("node agent readiness", "node", node, "ready", after)
	}
	// The node's view, as it is but for its agent: the same sample, so
	// the cache's watchers (which take every view they are told of for a
	// new sample) are not told.
	if e := c.lookup(node); e != nil {
		if n := e.node.Load(); n != nil {
			v := *n
			c.stampAgent(&v)
			e.node.Store(&v)
		}
	}
}

func anyReady(pods map[types.UID]bool) bool {
	for _, r := range pods {
		if r {
			return true
		}
	}
	return false
}

// stampAgent sets a view's agent fields from what the cache knows of the
// node's agent. The caller holds c.mu.
func (c *Cache) stampAgent(n *Node) {
	n.AgentReady = anyReady(c.agents[n.Name])
	n.agentMaxAge = 0
	if n.AgentReady {
		n.agentMaxAge = c.agentMaxAge
	}
}
