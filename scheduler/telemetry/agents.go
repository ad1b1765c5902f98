// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
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
//
// Only the agent's own pods vouch for a node: pods in the agent's
// namespace whose controller is one of the agent's DaemonSets, by name and
// UID, as the cache watches them. A label is anyone's to set, and so is an
// owner reference: a pod that names the DaemonSet but not its UID, or runs
// elsewhere, is ignored (logged once, counted in
// telesched_scheduler_telemetry_ignored_agent_pods).

// DefaultAgentSelector selects the agent's pods (--telemetry-agent-pod-selector):
// the DaemonSet's and the chart's pod label.
const DefaultAgentSelector = "app.kubernetes.io/name=telesched-agent"

// DefaultAgentNamespace is the agent's namespace
// (--telemetry-agent-namespace): the manifests' in deploy/ (the chart
// installs in its release's namespace, and sets the flag to it).
const DefaultAgentNamespace = "telesched-system"

// DefaultAgentDaemonSets are the agent's DaemonSets
// (--telemetry-agent-daemonsets): deploy/agent's and the GPU variant's
// (deploy/variants/gpu), as the chart names them too.
var DefaultAgentDaemonSets = []string{"telesched-agent", "telesched-agent-gpu"}

// DefaultAgentMaxAge is how old a node's sample may be while its agent pod
// is Ready (--telemetry-max-age-ready-agent): the shipped heartbeat (5m)
// plus a minute for a write delayed by the API server or the publisher's
// backoff, which the agent's readiness tolerates for three intervals.
const DefaultAgentMaxAge = 6 * time.Minute

// SetAgents makes the cache watch the pods that selector selects in the
// agent's namespace (SetAgentOwners), and judge the telemetry of a node on
// which one of the agent's DaemonSets' is Ready fresh for maxAge (when
// longer than a plugin's telemetryMaxAge). An empty selector turns it off.
// Call it before Start.
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

// SetAgentOwners sets the namespace of the agent's pods and the names of
// the DaemonSets whose pods count as the agent's; only pods there, that
// one of them controls (by name and UID), keep their node fresh. Call it
// before Start.
func (c *Cache) SetAgentOwners(namespace string, daemonSets []string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("agent namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if len(daemonSets) == 0 {
		return errors.New("at least one agent DaemonSet must be named")
	}
	sets := map[string]types.UID{}
	for _, name := range daemonSets {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("agent DaemonSet %q: %s", name, strings.Join(errs, "; "))
		}
		sets[name] = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.agentNamespace, c.agentDaemonSets = namespace, sets
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

// startAgents runs the informers on the agent's DaemonSets and pods, in
// the agent's namespace, until ctx ends; the caller waits for hasSynced.
// The pods' informer starts once the DaemonSets are listed, so that no
// agent pod is taken for a stranger's while its DaemonSet is unknown.
func (c *Cache) startAgents(ctx context.Context, cfg *rest.Config) (hasSynced func() bool, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry cache: %w", err)
	}
	sets := client.AppsV1().DaemonSets(c.agentNamespace)
	dsInformer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return sets.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return sets.Watch(ctx, opts)
		},
	}, &appsv1.DaemonSet{}, 0, toolscache.Indexers{})
	// Of a DaemonSet, the cache keeps its name and UID.
	if err := dsInformer.SetTransform(func(obj any) (any, error) {
		if ds, ok := obj.(*appsv1.DaemonSet); ok {
			return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, UID: ds.UID, ResourceVersion: ds.ResourceVersion}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	if _, err := dsInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.agentDaemonSet(obj, false) },
		UpdateFunc: func(_, obj any) { c.agentDaemonSet(obj, false) },
		DeleteFunc: func(obj any) { c.agentDaemonSet(obj, true) },
	}); err != nil {
		return nil, err
	}
	pods := client.CoreV1().Pods(c.agentNamespace)
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
	// Of a pod, the cache keeps what readiness and ownership need.
	if err := informer.SetTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		var owners []metav1.OwnerReference
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			owners = []metav1.OwnerReference{*ref}
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp, OwnerReferences: owners},
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
	go dsInformer.RunWithContext(ctx)
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), dsInformer.HasSynced) {
			informer.RunWithContext(ctx)
		}
	}()
	return func() bool { return dsInformer.HasSynced() && informer.HasSynced() }, nil
}

func readyCondition(p *corev1.Pod) []corev1.PodCondition {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return []corev1.PodCondition{{Type: cond.Type, Status: cond.Status}}
		}
	}
	return nil
}

// agentPodInfo is what the cache knows of a pod its informer lists: its
// node, readiness and controller.
type agentPodInfo struct {
	namespace, name string
	node            string
	ready           bool
	// ownerKind, ownerName and ownerUID are its controller's; empty when
	// it has none.
	ownerKind, ownerName string
	ownerUID             types.UID
}

func (c *Cache) agentPod(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	info := agentPodInfo{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName}
	if !deleted && p.DeletionTimestamp == nil {
		for _, cond := range p.Status.Conditions {
			info.ready = info.ready || cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
		}
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.APIVersion == "apps/v1" {
		info.ownerKind, info.ownerName, info.ownerUID = ref.Kind, ref.Name, ref.UID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if deleted {
		delete(c.agentPods, p.UID)
		c.judgeAgentPod(p.UID, info, true)
		return
	}
	c.agentPods[p.UID] = info
	c.judgeAgentPod(p.UID, info, false)
}

// agentDaemonSet records the UID of one of the agent's DaemonSets, and
// judges again the pods that name it.
func (c *Cache) agentDaemonSet(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Namespace != c.agentNamespace {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.agentDaemonSets[ds.Name]; !ok {
		return
	}
	uid := ds.UID
	if deleted {
		uid = ""
	}
	if c.agentDaemonSets[ds.Name] == uid {
		return
	}
	c.agentDaemonSets[ds.Name] = uid
	for podUID, info := range c.agentPods {
		if info.ownerName == ds.Name {
			c.judgeAgentPod(podUID, info, false)
		}
	}
}

// ownedByAgent reports whether a pod's controller is one of the agent's
// DaemonSets, as the cache last listed them. The caller holds c.mu.
func (c *Cache) ownedByAgent(info agentPodInfo) bool {
	uid, ok := c.agentDaemonSets[info.ownerName]
	return ok && info.namespace == c.agentNamespace && info.ownerKind == "DaemonSet" && uid != "" && info.ownerUID == uid
}

// judgeAgentPod records a pod as its node's agent when one of the agent's
// DaemonSets controls it, and ignores it otherwise, logging it the first
// time. The caller holds c.mu.
func (c *Cache) judgeAgentPod(uid types.UID, info agentPodInfo, deleted bool) {
	owned := !deleted && c.ownedByAgent(info)
	switch {
	case deleted || owned:
		delete(c.ignoredAgents, uid)
	case !c.ignoredAgents[uid]:
		c.ignoredAgents[uid] = true
		owner := "none"
		if info.ownerName != "" {
			owner = fmt.Sprintf("%s %s (uid %s)", info.ownerKind, info.ownerName, info.ownerUID)
		}
		klog.V(2).InfoS("ignoring a pod with the agent's labels: no DaemonSet of the agent's controls it, so it does not vouch for its node's telemetry",
			"pod", klog.KRef(info.namespace, info.name), "node", info.node, "controller", owner,
			"agentNamespace", c.agentNamespace, "agentDaemonSets", c.agentDaemonSetNames())
	}
	ignoredAgentPods.Set(float64(len(c.ignoredAgents)))
	c.setAgentPod(info.node, uid, owned && info.ready, !owned)
}

// agentDaemonSetNames lists the agent's DaemonSets, for logs. The caller
// holds c.mu.
func (c *Cache) agentDaemonSetNames() []string {
	return slices.Sorted(maps.Keys(c.agentDaemonSets))
}

// IgnoredAgentPods is the number of pods with the agent's labels that no
// DaemonSet of the agent's controls.
func (c *Cache) IgnoredAgentPods() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ignoredAgents)
}

// SetAgentPod records whether an agent pod on node is Ready (gone: it was
// deleted). A node's agent counts as Ready while any of its agent pods is:
// a rolling update may run two for a moment.
func (c *Cache) SetAgentPod(node string, uid types.UID, ready, gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setAgentPod(node, uid, ready, gone)
}

// setAgentPod is SetAgentPod with c.mu held.
func (c *Cache) setAgentPod(node string, uid types.UID, ready, gone bool) {
	pods := c.agents[node]
	if gone && pods == nil {
		return
	}
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
	// new sample) are not told; its view watchers are.
	if e := c.lookup(node); e != nil {
		if n := e.node.Load(); n != nil {
			v := *n
			c.stampAgent(&v)
			e.node.Store(&v)
			for _, w := range c.viewers {
				w(node, &v)
			}
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
