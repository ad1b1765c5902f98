// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	agentapp "github.com/telesched/telesched/agent/app"
	configv1 "github.com/telesched/telesched/apis/config/v1"
	"github.com/telesched/telesched/internal/proc"
	"github.com/telesched/telesched/sandbox/sim"
	"github.com/telesched/telesched/scheduler/powerbudget"
)

// The soak (Options.Soak): telesched-descheduler evicting (not dry-run),
// two replicas under leader election, through churn and every fault the
// descheduler must not act wrongly on, one after another:
//
//   - fan: the heater's fan fails under running pods (its agent taints
//     it); the leading replica is killed during the hot spell, the
//     standby takes over;
//   - sensor: another node runs hot, then every temperature sensor of it
//     fails (and the node, unseen, cools);
//   - dying: a node's load rises past a budget of two nodes, then its
//     agent dies (the node's last watts stay high);
//   - nested: a rack budget inside a row budget, both over by the same
//     watts, which one node's rise brings;
//   - taint-off: the heater's fan fails again; its agent is restarted
//     with --overheating-taint=false while the taint is on.
//
// Through all of it a ReplicaSet's and a StatefulSet's pods are deleted
// and re-created (churn); one StatefulSet pod runs on a local
// PersistentVolume of the heater, which the default policy protects.
const soakNamespace = "soak"

// The soak's workload, times and bounds (sandbox time; see
// DefaultDeschedulerInterval).
const (
	soakWebReplicas = 12
	soakWebCPU      = "2"
	soakDBCPU       = "1"
	soakWebSet      = "web"
	// soakPinned of the ReplicaSet's first pods are bound to the heater
	// (as pods placed before its fan fails); their replacements, and
	// every other pod, are scheduled.
	soakPinned = 4
	soakDBSet  = "db"
	// soakLocalPod is the StatefulSet pod on the heater's local PV.
	soakLocalPod = "db-0"
	// soakChurnEvery is how often churn deletes a running pod (never
	// soakLocalPod); its controller, played by the sandbox, re-creates it.
	soakChurnEvery = 3 * time.Second
	// soakReplaceBound is how soon an evicted pod's replacement must be
	// bound: a few scheduling attempts with backoff.
	soakReplaceBound = 30 * time.Second
	// The leader election of the two replicas: a killed leader's Lease
	// is taken within soakLeaseDuration.
	soakLeaseDuration, soakRenewDeadline, soakRetryPeriod = 6 * time.Second, 4 * time.Second, time.Second
	// soakThermalHold is the descheduler's --telemetry-thermal-hold;
	// soakSensorHold the failing node's agent's --sensor-hold-duration;
	// soakTaintHold the heater agent's --overheating-taint-hold.
	soakThermalHold = 15 * time.Second
	soakSensorHold  = 5 * time.Second
	soakTaintHold   = 15 * time.Second
	// soakFaultAbove is how far past its limit − margin a faulted node
	// would settle (°C); soakFaultHold how long the heater's fan stays
	// failed.
	soakFaultAbove = 8.0
	soakFaultHold  = 60 * time.Second
	// soakBudgetSlack is what the nested budgets allow over their members'
	// watts before the rise; soakRiseWatts what the rise adds, so both are
	// over by soakRiseWatts − soakBudgetSlack.
	soakBudgetSlack = 40.0
	soakRiseWatts   = 60.0
	// soakDyingRiseWatts is how far the dying node's load rises above its
	// budget's slack before its agent dies.
	soakDyingRiseWatts = 200.0
	// soakTaintClearBound is how soon a restarted agent with the taint
	// off must have lifted it.
	soakTaintClearBound = 10 * time.Second
)

// The soak's stages, which its evictions are tagged with.
const (
	soakStageFan      = "fan"
	soakStageSensor   = "sensor"
	soakStageDying    = "dying"
	soakStageNested   = "nested"
	soakStageTaintOff = "taint-off"
)

// SoakResult is what the soak saw: every eviction, and the counts its
// goals are judged by.
type SoakResult struct {
	Seconds   float64
	Evictions []SoakEviction
	// ChurnDeletes counts the pods churn deleted.
	ChurnDeletes int
	// Unplaced: evicted pods whose replacement was not bound within
	// ReplaceBoundSeconds (goal 0).
	Unplaced            int
	ReplaceBoundSeconds float64
	// EvictedAgain: replacements of evicted pods evicted again from the
	// node they were moved to, in the same stage (by the same fault; goal
	// 0); EvictedAgainLater, in a later stage (by that stage's fault).
	EvictedAgain, EvictedAgainLater int
	// OnOldSample: evictions decided on a sample older than the last
	// eviction (an earlier cycle's) from the node, or from a member of the
	// budget (goal 0).
	OnOldSample int
	// Protected: evictions of the pod on the local PersistentVolume
	// (goal 0).
	Protected int
	// Failover: the killed leader's last eviction, when the standby led,
	// and evictions it decided within a sustain of leading (goal 0).
	LeaderKilledAt, NewLeaderAt float64
	EarlyAfterFailover          int
	// SensorNode's sensors failed at SensorFailedAt; evictions from it
	// later than its agent's and the descheduler's holds (goal 0).
	SensorNode       string
	SensorFailedAt   float64
	AfterSensorHolds int
	WhileSensorsHeld int
	// DyingNode's agent died at AgentDiedAt; evictions for its budget once
	// its last sample was past the telemetry max age (goal 0).
	DyingNode       string
	AgentDiedAt     float64
	AfterAgentStale int
	WhileAgentFresh int
	// Nested: evictions the rack and the row budgets decided; the
	// oracle's fewest pods bringing both under, by the simulation's
	// settled watts. The row is over by what the rack is: its evictions
	// beyond the rack's (goal 0), the rack's beyond the oracle's + 1
	// (goal 0, as make demo's stages).
	NestedRack, NestedRow string
	NestedRackEvicted     int
	NestedRowEvicted      int
	NestedOracle          int
	// TaintClearedSeconds: from the agent's restart with the taint off to
	// the taint gone and the condition False; -1 if never.
	TaintClearedSeconds float64
	TaintClearedReason  string
}

// SoakEviction is one TeleschedEvicted Event of the soak.
type SoakEviction struct {
	// At is when the descheduler decided it (the Event's time), in
	// seconds since the soak began; SampleAge how much older than that
	// the sample it was decided on was (the budget's oldest counted).
	At, SampleAge                         float64
	Stage, Plugin, Pod, From, Destination string
	Budget                                string
	// ReplacedOn and ReplacedAfter: where and how soon (seconds, from
	// the pod's deletion) its replacement was bound; "" if never.
	ReplacedOn    string
	ReplacedAfter float64

	uid        types.UID
	lineage    string
	at, sample time.Time
}

// soakLog is what the watcher knows of the soak's pods.
type soakLog struct {
	mu        sync.Mutex
	running   map[types.UID]placed
	binds     []soakBind
	evictions []SoakEviction
	events    map[string]bool
	deleted   map[types.UID]time.Time // when the watcher saw each pod go
	stage     string
	recreate  func(pod *corev1.Pod)
}

// soakBind is a soak pod seen bound.
type soakBind struct {
	Pod, Lineage, Node string
	UID                types.UID
	At                 time.Time
}

// The sample an eviction was decided on, as its Event says it
// (descheduler/plugins: thermal's "sample taken T", budget's "samples
// taken since T"), and the budget it was over.
var (
	sampleTakenRE = regexp.MustCompile(`samples? taken (?:since )?(\S+?)[,)]`)
	budgetOverRE  = regexp.MustCompile(`PowerBudget (\S+) over`)
)

func (w *watcher) onSoakPod(pod *corev1.Pod) {
	l := &w.soak
	l.mu.Lock()
	if l.running == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		l.mu.Unlock()
		return
	}
	if _, ok := l.running[pod.UID]; ok {
		l.mu.Unlock()
		return
	}
	cpu, _ := podRequests(pod)
	l.running[pod.UID] = placed{Pod: pod.Name, Node: pod.Spec.NodeName, Request: cpu}
	l.binds = append(l.binds, soakBind{Pod: pod.Name, Lineage: pod.Labels[lineageLabel], Node: pod.Spec.NodeName, UID: pod.UID, At: time.Now()})
	l.mu.Unlock()
	if n := w.nodes[pod.Spec.NodeName]; n != nil {
		n.AddPod(pod.UID, cpu, 0)
	}
	go w.markRunning(pod)
	w.update(func(*view) {})
}

func (w *watcher) onSoakDelete(pod *corev1.Pod) {
	l := &w.soak
	l.mu.Lock()
	p, ran := l.running[pod.UID]
	delete(l.running, pod.UID)
	if l.deleted != nil {
		l.deleted[pod.UID] = time.Now()
	}
	recreate := l.recreate
	l.mu.Unlock()
	if n := w.nodes[p.Node]; ran && n != nil {
		n.RemovePod(pod.UID)
	}
	if recreate != nil {
		go recreate(pod)
	}
	w.update(func(*view) {})
}

func (w *watcher) onSoakEvent(ev *corev1.Event) {
	if ev.Reason != "TeleschedEvicted" {
		return
	}
	l := &w.soak
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events == nil || l.events[ev.Name] {
		return
	}
	l.events[ev.Name] = true
	at := ev.EventTime.Time
	if at.IsZero() {
		at = ev.CreationTimestamp.Time
	}
	e := SoakEviction{Stage: l.stage, Pod: ev.InvolvedObject.Name, uid: ev.InvolvedObject.UID, at: at, Destination: destinationOf(ev.Message)}
	e.Plugin, _, _ = strings.Cut(ev.Message, ":")
	if m := sampleTakenRE.FindStringSubmatch(ev.Message); m != nil {
		if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			e.sample = t
		}
	}
	if m := budgetOverRE.FindStringSubmatch(ev.Message); m != nil {
		e.Budget = m[1]
	}
	for _, b := range l.binds {
		if b.UID == e.uid {
			e.From, e.lineage = b.Node, b.Lineage
		}
	}
	l.evictions = append(l.evictions, e)
}

// soakPod is a pod of the soak's ReplicaSet (owner a ReplicaSet) or
// StatefulSet (claim, when set, its PersistentVolumeClaim), for the
// profile's scheduler; grace 0, as no kubelet runs here to finish a
// graceful deletion.
func soakPod(name, lineage, scheduler, node string, owner metav1.Object, kind, cpu, claim string) *corev1.Pod {
	controller := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: soakNamespace,
			Labels:          map[string]string{lineageLabel: lineage, "app": owner.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &controller}},
		},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			NodeName:                      node,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		},
	}
	if claim != "" {
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return pod
}

// soakWorkload creates the ReplicaSet (soakPinned of its pods bound to
// node), the StatefulSet, the local PV of soakLocalPod on node and its
// claim (bound, as the PV controller, which
// does not run here, would bind them), and the first pods; it returns
// the re-creator that plays both controllers.
func (s *sandbox) soakWorkload(ctx context.Context, node string) (func(*corev1.Pod), error) {
	labels := func(app string) map[string]string { return map[string]string{"app": app} }
	tmpl := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(app)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	replicas, two := int32(soakWebReplicas), int32(2)
	rs, err := s.kube.AppsV1().ReplicaSets(soakNamespace).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: soakWebSet, Namespace: soakNamespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels(soakWebSet)}, Template: tmpl(soakWebSet)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	sts, err := s.kube.AppsV1().StatefulSets(soakNamespace).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: soakDBSet, Namespace: soakNamespace},
		Spec: appsv1.StatefulSetSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels(soakDBSet)}, Template: tmpl(soakDBSet)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	// The local PV: a no-provisioner StorageClass that waits for the
	// first consumer, a PV of node, its claim, bound to each other.
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := s.kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "soak-local"},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	claimName := "data-" + soakLocalPod
	size := resource.MustParse("10Gi")
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(soakNamespace).Create(ctx, &corev1.PersistentVolumeClaim{
		// The annotation the PV controller sets once it has bound a claim;
		// the scheduler's VolumeBinding counts a claim bound only with it.
		ObjectMeta: metav1.ObjectMeta{Name: claimName, Namespace: soakNamespace, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: new("soak-local"),
			VolumeName: "soak-local-" + node, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	pv, err := s.kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "soak-local-" + node},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: "soak-local", PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/soak"}},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: soakNamespace, Name: claimName, UID: pvc.UID},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err := s.kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	pvc.Status.Phase, pvc.Status.Capacity, pvc.Status.AccessModes = corev1.ClaimBound, corev1.ResourceList{corev1.ResourceStorage: size}, pvc.Spec.AccessModes
	if _, err := s.kube.CoreV1().PersistentVolumeClaims(soakNamespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}

	create := func(pod *corev1.Pod) {
		if _, err := s.kube.CoreV1().Pods(soakNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "creating a soak pod", "pod", klog.KObj(pod))
		}
	}
	dbPod := func(name string) *corev1.Pod {
		claim := ""
		if name == soakLocalPod {
			claim = claimName
		}
		return soakPod(name, name, s.opts.Profile, "", sts, "StatefulSet", soakDBCPU, claim)
	}
	for i := range soakWebReplicas {
		name := fmt.Sprintf("%s-%d", soakWebSet, i)
		pin := ""
		if i < soakPinned {
			pin = node
		}
		create(soakPod(name, name, s.opts.Profile, pin, rs, "ReplicaSet", soakWebCPU, ""))
	}
	for i := range 2 {
		create(dbPod(fmt.Sprintf("%s-%d", soakDBSet, i)))
	}
	// The controllers: a ReplicaSet's replacement has a new name (the
	// lineage's next), a StatefulSet's the same.
	return func(pod *corev1.Pod) {
		if pod.Labels["app"] == soakDBSet {
			create(dbPod(pod.Name))
			return
		}
		lineage := pod.Labels[lineageLabel]
		gen := 0
		if rest, ok := strings.CutPrefix(pod.Name, lineage+"-"); ok {
			_, _ = fmt.Sscan(rest, &gen)
		}
		create(soakPod(fmt.Sprintf("%s-%d", lineage, gen+1), lineage, s.opts.Profile, "", rs, "ReplicaSet", soakWebCPU, ""))
	}, nil
}

// soakReplica is one telesched-descheduler process of the soak.
type soakReplica struct {
	p   *proc.Process
	log string
}

// startSoakReplica starts a telesched-descheduler replica, evicting, with
// the sandbox's scheduler configuration and profile, under leader
// election with short leases; its log is logs/descheduler-<name>.log.
func (s *sandbox) startSoakReplica(name string) (*soakReplica, error) {
	p, path, err := s.runDescheduler("descheduler-"+name+".log",
		"--scheduler-config="+filepath.Join(s.dir, "scheduler-config.yaml"), "--scheduler-profile="+s.opts.Profile,
		"--telemetry-thermal-hold="+soakThermalHold.String(),
		"--leader-elect-lease-duration="+soakLeaseDuration.String(), "--leader-elect-renew-deadline="+soakRenewDeadline.String(),
		"--leader-elect-retry-period="+soakRetryPeriod.String())
	if err != nil {
		return nil, err
	}
	return &soakReplica{p: p, log: path}, nil
}

// leading reports whether the replica's log says it leads.
func (r *soakReplica) leading() bool {
	_, ok := r.ledAt()
	return ok
}

// ledAt is when the replica started leading, by its log line's klog
// header (Lmmdd hh:mm:ss.uuuuuu, the local time zone, no year).
func (r *soakReplica) ledAt() (time.Time, bool) {
	b, _ := os.ReadFile(r.log)
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "Leading: descheduling cycles start") {
			continue
		}
		return klogTime(line, time.Now())
	}
	return time.Time{}, false
}

// klogTime is the time of a klog line, in the year of now (the year
// before, for a line that would be more than a day ahead of now).
func klogTime(line string, now time.Time) (time.Time, bool) {
	if len(line) < 22 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	t = t.AddDate(now.Year(), 0, 0)
	if t.After(now.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t, true
}

// soakPhase runs the soak for the heater's fleet and reports it.
func (s *sandbox) soakPhase(ctx context.Context) (err error) {
	heater := s.res.Heat.Node
	if heater == "" {
		return errors.New("--soak: the fleet has no node with a fan fault (fanFault: true), which the soak's fan stage needs")
	}
	var cpuNodes, gpuNodes []string
	for _, n := range s.sortedNodes() {
		switch {
		case n.Spec.Name == heater:
		case len(n.Spec.GPUs) > 0:
			gpuNodes = append(gpuNodes, n.Spec.Name)
		default:
			cpuNodes = append(cpuNodes, n.Spec.Name)
		}
	}
	if len(cpuNodes) < 4 || len(gpuNodes) < 2 {
		return fmt.Errorf("--soak: the fleet needs at least 4 CPU nodes besides the heater and 2 GPU nodes (the default fleet has them), has %d and %d", len(cpuNodes), len(gpuNodes))
	}
	start := time.Now()
	r := &SoakResult{ReplaceBoundSeconds: soakReplaceBound.Seconds(), TaintClearedSeconds: -1}
	s.res.Soak = r
	since := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	s.printf("\n  soak: telesched-descheduler evicting, 2 replicas under leader election, through churn and faults\n")

	if err := s.createNamespace(ctx, soakNamespace); err != nil {
		return err
	}
	// The heater's agent taints it.
	if err := s.restartAgent(heater, func(o *agentapp.Options) { o.OverheatingTaint, o.OverheatingTaintHold = true, soakTaintHold }); err != nil {
		return err
	}
	l := &s.watch.soak
	l.mu.Lock()
	l.running, l.events, l.deleted, l.stage = map[types.UID]placed{}, map[string]bool{}, map[types.UID]time.Time{}, soakStageFan
	l.mu.Unlock()
	recreate, err := s.soakWorkload(ctx, heater)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.recreate = recreate
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.recreate = nil
		l.mu.Unlock()
	}()
	if err := s.watch.waitFor(ctx, fmt.Sprintf("the soak's %d pods to run", soakWebReplicas+2), func(*view) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.running) == soakWebReplicas+2
	}); err != nil {
		return err
	}
	s.printf("    %d pods of %s CPUs (ReplicaSet %s, %d of them bound to %s) and 2 of %s CPU (StatefulSet %s; %s on a local PV of %s) run\n",
		soakWebReplicas, soakWebCPU, soakWebSet, soakPinned, heater, soakDBCPU, soakDBSet, soakLocalPod, heater)

	// Two replicas: a leads, b stands by.
	a, err := s.startSoakReplica("a")
	if err != nil {
		return err
	}
	defer func() { a.p.Stop() }()
	if err := s.waitUntil(ctx, "replica a to lead", 30*time.Second, a.leading); err != nil {
		return err
	}
	b, err := s.startSoakReplica("b")
	if err != nil {
		return err
	}
	defer func() { b.p.Stop() }()
	s.printf("    replicas a and b of telesched-descheduler run (logs/descheduler-a.log, -b.log); a leads; leases %v\n", soakLeaseDuration)

	// Churn, from now to the end.
	churnCtx, stopChurn := context.WithCancel(ctx)
	var churn sync.WaitGroup
	var paused atomic.Bool
	churn.Go(func() { r.ChurnDeletes = s.churn(churnCtx, &paused) })
	defer func() { stopChurn(); churn.Wait() }()

	// fan: the heater's fan fails; a is killed during the hot spell.
	hn := s.nodes[heater]
	limit := float64(hn.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000
	hn.SetFaultHeat(faultFor(hn.Spec, hn.Utilization(), limit+soakFaultAbove))
	faultAt := time.Now()
	s.printf("    [%5.0fs] fan: %s's fan fails; it would settle %.0f°C past its limit − margin %.1f°C\n", since(faultAt), heater, soakFaultAbove, limit)
	_ = s.waitUntil(ctx, "a first eviction from "+heater, 45*time.Second, func() bool { return s.soakEvictedFrom(heater) })
	_ = sleep(ctx, 2*time.Second)
	if err := a.p.Kill(); err != nil {
		return err
	}
	r.LeaderKilledAt = since(time.Now())
	s.printf("    [%5.0fs] fan: leader a killed (SIGKILL, its Lease not released)\n", r.LeaderKilledAt)
	if err := s.waitUntil(ctx, "replica b to lead", 3*soakLeaseDuration, b.leading); err != nil {
		return err
	}
	newLeader, _ := b.ledAt()
	r.NewLeaderAt = since(newLeader)
	s.printf("    [%5.0fs] fan: replica b leads; a restarted as a standby\n", r.NewLeaderAt)
	if a, err = s.startSoakReplica("a2"); err != nil {
		return err
	}
	_ = sleep(ctx, time.Until(faultAt.Add(soakFaultHold)))
	hn.SetFaultHeat(0)
	s.printf("    [%5.0fs] fan: repaired\n", since(time.Now()))
	if err := s.watch.waitFor(ctx, heater+" to cool", func(*view) bool { return hn.Celsius() < limit-3 }); err != nil {
		return err
	}

	// sensor: the CPU node running the most soak pods runs hot; its
	// sensors fail, and it cools unseen. Its agent holds a failed
	// sensor's reading soakSensorHold.
	s.soakStage(soakStageSensor)
	r.SensorNode = s.busiestSoakNode(cpuNodes)
	if err := s.restartAgent(r.SensorNode, func(o *agentapp.Options) { o.SensorHold = soakSensorHold }); err != nil {
		return err
	}
	sn := s.nodes[r.SensorNode]
	sLimit := float64(sn.Spec.Host.CritMilliCelsius)/1000 - float64(thermalMarginMilli)/1000
	sn.SetFaultHeat(faultFor(sn.Spec, sn.Utilization(), sLimit+soakFaultAbove))
	s.printf("    [%5.0fs] sensor: %s runs hot\n", since(time.Now()), r.SensorNode)
	_ = s.waitUntil(ctx, "a first eviction from "+r.SensorNode, 40*time.Second, func() bool { return s.soakEvictedFrom(r.SensorNode) })
	sn.FailSensors(true)
	sn.SetFaultHeat(0)
	failedAt := time.Now()
	r.SensorFailedAt = since(failedAt)
	s.printf("    [%5.0fs] sensor: every temperature sensor of %s fails (the node cools, unseen); holds: agent %v, descheduler %v\n", r.SensorFailedAt, r.SensorNode, soakSensorHold, soakThermalHold)
	_ = sleep(ctx, soakSensorHold+soakThermalHold+s.opts.ThermalSustain+3*s.opts.DeschedulerInterval)
	sn.FailSensors(false)

	// dying: a budget of two GPU nodes; one's load rises past it, then
	// its agent dies.
	s.soakStage(soakStageDying)
	r.DyingNode = gpuNodes[len(gpuNodes)-1]
	pair := []string{gpuNodes[0], r.DyingNode}
	dyn, err := dynamic.NewForConfig(s.cp.Config)
	if err != nil {
		return err
	}
	budgets := dyn.Resource(powerbudget.Resource)
	pairWatts := s.publishedWatts(pair...)
	if err := s.createSoakBudget(ctx, budgets, "soak-dying", pairWatts+soakBudgetSlack, pair); err != nil {
		return err
	}
	dn := s.nodes[r.DyingNode]
	dn.SetExtraLoad(extraFor(dn, soakBudgetSlack+soakDyingRiseWatts), 0)
	_ = sleep(ctx, 3*s.opts.Interval)
	s.stopAgent(r.DyingNode)
	diedAt := time.Now()
	r.AgentDiedAt = since(diedAt)
	s.printf("    [%5.0fs] dying: PowerBudget soak-dying (%s) at %.0f W + %.0f W; %s's load rises ~%.0f W past it and its agent dies\n",
		r.AgentDiedAt, strings.Join(pair, ", "), pairWatts, soakBudgetSlack, r.DyingNode, soakDyingRiseWatts)
	maxAge := configv1.DefaultTelemetryMaxAge
	_ = sleep(ctx, maxAge+s.opts.BudgetSustain+3*s.opts.DeschedulerInterval)
	dn.SetExtraLoad(0, 0)
	if err := s.startAgent(r.DyingNode, nil); err != nil {
		return err
	}
	if err := budgets.Delete(ctx, "soak-dying", metav1.DeleteOptions{}); err != nil {
		return err
	}

	// nested: a rack inside a row, both over by the same watts. Churn
	// pauses, so that the oracle's pods stay where they are.
	s.soakStage(soakStageNested)
	paused.Store(true)
	rest := slices.DeleteFunc(slices.Clone(cpuNodes), func(n string) bool { return n == r.SensorNode })
	rise := s.busiestSoakNode(rest)
	rack := []string{rise}
	for _, n := range rest {
		if n != rise && len(rack) < 2 {
			rack = append(rack, n)
		}
	}
	row := append(slices.Clone(rack), gpuNodes[0])
	r.NestedRack, r.NestedRow = "soak-rack", "soak-row"
	rackWatts, rowWatts := s.publishedWatts(rack...), s.publishedWatts(row...)
	if err := s.createSoakBudget(ctx, budgets, r.NestedRack, rackWatts+soakBudgetSlack, rack); err != nil {
		return err
	}
	if err := s.createSoakBudget(ctx, budgets, r.NestedRow, rowWatts+soakBudgetSlack, row); err != nil {
		return err
	}
	rn := s.nodes[rise]
	riseU := extraFor(rn, soakRiseWatts)
	r.NestedOracle = s.nestedOracle(rack, rise, riseU, soakRiseWatts-soakBudgetSlack)
	rn.SetExtraLoad(riseU, 0)
	s.printf("    [%5.0fs] nested: PowerBudgets %s (%s, %.0f W) inside %s (%s, %.0f W), each %.0f W over its members; %s's load rises %.0f W; oracle: %d pod(s)\n",
		since(time.Now()), r.NestedRack, strings.Join(rack, ", "), rackWatts, r.NestedRow, strings.Join(row, ", "), rowWatts, soakBudgetSlack, rise, soakRiseWatts, r.NestedOracle)
	_ = sleep(ctx, 2*s.opts.BudgetSustain+8*s.opts.DeschedulerInterval)
	rn.SetExtraLoad(0, 0)
	for _, name := range []string{r.NestedRack, r.NestedRow} {
		if err := budgets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	paused.Store(false)

	// taint-off: the heater's fan fails again; once it is tainted, its
	// agent restarts with the taint off.
	s.soakStage(soakStageTaintOff)
	hn.SetFaultHeat(faultFor(hn.Spec, hn.Utilization(), limit+soakFaultAbove))
	s.printf("    [%5.0fs] taint-off: %s's fan fails again\n", since(time.Now()), heater)
	if err := s.waitUntil(ctx, heater+" to be tainted", 60*time.Second, func() bool { t, _ := s.overheating(ctx, heater); return t }); err != nil {
		return err
	}
	if err := s.restartAgent(heater, func(o *agentapp.Options) { o.OverheatingTaint = false }); err != nil {
		return err
	}
	offAt := time.Now()
	if s.waitUntil(ctx, heater+"'s taint to be lifted", soakTaintClearBound, func() bool {
		t, reason := s.overheating(ctx, heater)
		r.TaintClearedReason = reason
		return !t && reason == "TaintTurnedOff"
	}) == nil {
		r.TaintClearedSeconds = time.Since(offAt).Seconds()
	}
	s.printf("    [%5.0fs] taint-off: agent restarted with --overheating-taint=false; taint gone, condition reason %q, after %.1fs\n", since(offAt), r.TaintClearedReason, r.TaintClearedSeconds)
	hn.SetFaultHeat(0)
	stopChurn()
	churn.Wait()
	// Replacements still pending are bound by now, or never will be.
	_ = sleep(ctx, soakReplaceBound)
	r.Seconds = since(time.Now())
	s.judgeSoak(r, start, heater, failedAt, diedAt, newLeader, maxAge)
	s.printSoak(r)
	return nil
}

// restartAgent stops node's agent and starts it again with configure.
func (s *sandbox) restartAgent(node string, configure func(*agentapp.Options)) error {
	s.stopAgent(node)
	return s.startAgent(node, configure)
}

// soakStage tags the evictions from now on.
func (s *sandbox) soakStage(stage string) {
	s.watch.soak.mu.Lock()
	s.watch.soak.stage = stage
	s.watch.soak.mu.Unlock()
}

// soakEvictedFrom reports whether a soak pod was evicted from node in
// the current stage.
func (s *sandbox) soakEvictedFrom(node string) bool {
	l := &s.watch.soak
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evictions {
		if e.From == node && e.Stage == l.stage {
			return true
		}
	}
	return false
}

// waitUntil polls cond every half second for at most d.
func (s *sandbox) waitUntil(ctx context.Context, what string, d time.Duration, cond func() bool) error {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("waiting %v for %s", d, what)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// churn deletes a random running soak pod (never soakLocalPod) every
// soakChurnEvery, but while paused, until ctx ends; it returns how many
// it deleted.
func (s *sandbox) churn(ctx context.Context, paused *atomic.Bool) int {
	deleted := 0
	t := time.NewTicker(soakChurnEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return deleted
		case <-t.C:
		}
		if paused.Load() {
			continue
		}
		l := &s.watch.soak
		l.mu.Lock()
		var names []string
		for _, p := range l.running {
			if p.Pod != soakLocalPod {
				names = append(names, p.Pod)
			}
		}
		l.mu.Unlock()
		if len(names) == 0 {
			continue
		}
		name := names[rand.IntN(len(names))]
		if err := s.kube.CoreV1().Pods(soakNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err == nil {
			deleted++
		}
	}
}

// publishedWatts is the sum of the nodes' latest published watts.
func (s *sandbox) publishedWatts(nodes ...string) float64 {
	var sum float64
	s.watch.read(func(v *view) {
		for _, n := range nodes {
			if t := v.telemetry[n]; t != nil {
				sum += float64(t.Watts)
			}
		}
	})
	return sum
}

// extraFor is the CPU utilization that, added to n's CPUs' (not its
// GPUs'), makes it draw
// about watts more, settled (bisection: watts rise with load).
func extraFor(n *sim.Node, watts float64) float64 {
	base := n.SteadyLoadWatts(0, 0, 0)
	_, hi := bisect(0, 1, 40, func(u float64) bool { return n.SteadyLoadWatts(u, 0, 0)-base < watts })
	return hi
}

// busiestSoakNode is the node of nodes running the most soak pods.
func (s *sandbox) busiestSoakNode(nodes []string) string {
	count := map[string]int{}
	l := &s.watch.soak
	l.mu.Lock()
	for _, p := range l.running {
		count[p.Node]++
	}
	l.mu.Unlock()
	best := nodes[0]
	for _, n := range nodes {
		if count[n] > count[best] {
			best = n
		}
	}
	return best
}

// nestedOracle is the fewest soak pods of the rack whose leaving frees
// need watts once the rise node draws riseU more: the pods freeing the
// most first (fewest items reaching a sum: greedy is exact).
func (s *sandbox) nestedOracle(rack []string, rise string, riseU, need float64) int {
	var freed []float64
	l := &s.watch.soak
	l.mu.Lock()
	for _, p := range l.running {
		if !slices.Contains(rack, p.Node) || p.Pod == soakLocalPod {
			continue
		}
		n := s.nodes[p.Node]
		u := 0.0
		if p.Node == rise {
			u = riseU
		}
		freed = append(freed, n.SteadyLoadWatts(u, 0, 0)-n.SteadyLoadWatts(u, 0, -p.Request))
	}
	l.mu.Unlock()
	slices.Sort(freed)
	slices.Reverse(freed)
	sum := 0.0
	for i, f := range freed {
		sum += f
		if sum >= need {
			return i + 1
		}
	}
	return len(freed)
}

// createSoakBudget creates a PowerBudget of the named nodes, and
// remembers them.
func (s *sandbox) createSoakBudget(ctx context.Context, budgets dynamic.NamespaceableResourceInterface, name string, watts float64, nodes []string) error {
	if s.soakBudgets == nil {
		s.soakBudgets = map[string][]string{}
	}
	s.soakBudgets[name] = nodes
	values := make([]any, len(nodes))
	for i, n := range nodes {
		values[i] = n
	}
	obj := powerBudgetObject(name, map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/hostname", "operator": "In", "values": values}}}, int64(watts))
	if _, err := budgets.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("PowerBudget %s: %w", name, err)
	}
	return nil
}

// overheating reports whether node carries the overheating taint, and
// its TeleschedOverheating condition's reason.
func (s *sandbox) overheating(ctx context.Context, node string) (bool, string) {
	n, err := s.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, ""
	}
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == agentapp.OverheatingTaintKey })
	reason := ""
	for _, c := range n.Status.Conditions {
		if c.Type == agentapp.OverheatingConditionType {
			reason = c.Reason
			if c.Status != corev1.ConditionFalse && !tainted {
				reason = ""
			}
		}
	}
	return tainted, reason
}

// judgeSoak counts the soak's evictions against its goals.
func (s *sandbox) judgeSoak(r *SoakResult, start time.Time, heater string, failedAt, diedAt, newLeader time.Time, maxAge time.Duration) {
	l := &s.watch.soak
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := slices.Clone(l.evictions)
	slices.SortFunc(evs, func(a, b SoakEviction) int { return a.at.Compare(b.at) })
	cycle := s.opts.DeschedulerInterval / 2
	for i := range evs {
		e := &evs[i]
		e.At = e.at.Sub(start).Seconds()
		if !e.sample.IsZero() {
			e.SampleAge = e.at.Sub(e.sample).Seconds()
		}
		// Its replacement: the lineage's first pod bound after the pod
		// was seen gone (the Event may come after the replacement is
		// bound).
		gone, ok := l.deleted[e.uid]
		if !ok {
			gone = e.at
		}
		var repl *soakBind
		for j := range l.binds {
			b := &l.binds[j]
			if b.Lineage == e.lineage && b.UID != e.uid && b.At.After(gone) {
				repl = b
				break
			}
		}
		if repl != nil {
			e.ReplacedOn, e.ReplacedAfter = repl.Node, repl.At.Sub(gone).Seconds()
		}
		if repl == nil || repl.At.Sub(gone) > soakReplaceBound {
			r.Unplaced++
		}
		if k := slices.IndexFunc(evs, func(o SoakEviction) bool { return repl != nil && o.uid == repl.UID && o.From == repl.Node }); k >= 0 {
			if evs[k].Stage == e.Stage {
				r.EvictedAgain++
			} else {
				r.EvictedAgainLater++
			}
		}
		// The last eviction, in an earlier cycle, from the node or a
		// member of the budget.
		from := []string{e.From}
		if e.Budget != "" {
			from = s.soakBudgets[e.Budget]
		}
		var last time.Time
		for _, o := range evs[:i] {
			if slices.Contains(from, o.From) && o.at.Before(e.at.Add(-cycle)) {
				last = o.at
			}
		}
		// A sample's time is published to the second (metav1.Time).
		if !last.IsZero() && !e.sample.IsZero() && e.sample.Before(last.Truncate(time.Second)) {
			r.OnOldSample++
		}
		if e.Pod == soakLocalPod {
			r.Protected++
		}
		if !e.at.Before(newLeader) && e.at.Before(newLeader.Add(min(s.opts.ThermalSustain, s.opts.BudgetSustain))) {
			r.EarlyAfterFailover++
		}
		if e.From == r.SensorNode && e.Plugin == "TeleschedThermal" && e.at.After(failedAt) {
			if e.at.After(failedAt.Add(soakSensorHold + soakThermalHold + s.opts.DeschedulerInterval)) {
				r.AfterSensorHolds++
			} else {
				r.WhileSensorsHeld++
			}
		}
		if e.Budget == "soak-dying" && e.at.After(diedAt) {
			if e.at.After(diedAt.Add(maxAge + s.opts.DeschedulerInterval)) {
				r.AfterAgentStale++
			} else {
				r.WhileAgentFresh++
			}
		}
		switch e.Budget {
		case r.NestedRack:
			r.NestedRackEvicted++
		case r.NestedRow:
			r.NestedRowEvicted++
		}
	}
	r.Evictions = evs
}

// printSoak prints every eviction and the goals.
func (s *sandbox) printSoak(r *SoakResult) {
	s.printf("\n  soak: %d evictions in %.0fs, %d pods deleted by churn\n", len(r.Evictions), r.Seconds, r.ChurnDeletes)
	tw := newTable(s.opts.Out)
	fmt.Fprintf(tw, "    AT\tSTAGE\tPLUGIN\tPOD\tFROM\tDESTINATION\tSAMPLE AGE\tBUDGET\tREPLACEMENT ON\tAFTER\n")
	for _, e := range r.Evictions {
		age, budget, on, after := "-", e.Budget, e.ReplacedOn, "-"
		if e.SampleAge != 0 {
			age = fmt.Sprintf("%.1fs", e.SampleAge)
		}
		if budget == "" {
			budget = "-"
		}
		if on == "" {
			on = "never"
		} else {
			after = fmt.Sprintf("%.1fs", e.ReplacedAfter)
		}
		fmt.Fprintf(tw, "    %.0fs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At, e.Stage, e.Plugin, e.Pod, e.From, e.Destination, age, budget, on, after)
	}
	_ = tw.Flush()
	goal := func(name string, n int) {
		mark := "ok"
		if n != 0 {
			mark = "FAIL"
		}
		s.printf("    %-86s %3d  (goal 0) %s\n", name, n, mark)
	}
	goal(fmt.Sprintf("evicted pods whose replacement was not bound within %v", soakReplaceBound), r.Unplaced)
	goal(fmt.Sprintf("pods evicted again from the node they were moved to, by the same stage's fault (%d by a later one)", r.EvictedAgainLater), r.EvictedAgain)
	goal("evictions decided on a sample older than the node's (budget's) last eviction", r.OnOldSample)
	goal(fmt.Sprintf("evictions of %s (local PersistentVolume)", soakLocalPod), r.Protected)
	goal(fmt.Sprintf("evictions within a sustain of replica b leading (at %.0fs; a killed at %.0fs)", r.NewLeaderAt, r.LeaderKilledAt), r.EarlyAfterFailover)
	goal(fmt.Sprintf("evictions from %s after its sensors' holds (failed at %.0fs; %d while held)", r.SensorNode, r.SensorFailedAt, r.WhileSensorsHeld), r.AfterSensorHolds)
	goal(fmt.Sprintf("evictions for soak-dying once %s's last sample was stale (died at %.0fs; %d before)", r.DyingNode, r.AgentDiedAt, r.WhileAgentFresh), r.AfterAgentStale)
	goal(fmt.Sprintf("evictions for the row %s, over by what its rack %s is", r.NestedRow, r.NestedRack), r.NestedRowEvicted)
	goal(fmt.Sprintf("evictions for the rack %s beyond the oracle's %d + 1 (%d evicted)", r.NestedRack, r.NestedOracle, r.NestedRackEvicted), nestedBeyond(r))
	cleared := 0
	if r.TaintClearedSeconds < 0 {
		cleared = 1
	}
	goal(fmt.Sprintf("taint left on %v after the agent restarted with --overheating-taint=false (%.1fs)", soakTaintClearBound, r.TaintClearedSeconds), cleared)
}

// soakVerdict fails the run when a soak goal was missed.
func (r *SoakResult) soakVerdict() error {
	if r == nil {
		return nil
	}
	var missed []string
	for _, g := range []struct {
		what string
		n    int
	}{
		{"replacements not bound in time", r.Unplaced}, {"pods evicted again", r.EvictedAgain}, {"evictions on an old sample", r.OnOldSample},
		{"protected pod evicted", r.Protected}, {"evictions right after failover", r.EarlyAfterFailover}, {"evictions after a failed sensor's holds", r.AfterSensorHolds},
		{"evictions on a dead agent's stale watts", r.AfterAgentStale}, {"evictions for the row", r.NestedRowEvicted}, {"rack evictions beyond the oracle + 1", nestedBeyond(r)},
	} {
		if g.n > 0 {
			missed = append(missed, fmt.Sprintf("%d %s", g.n, g.what))
		}
	}
	if r.TaintClearedSeconds < 0 {
		missed = append(missed, "taint not lifted")
	}
	if len(missed) > 0 {
		return fmt.Errorf("soak: %s", strings.Join(missed, "; "))
	}
	return nil
}

// nestedBeyond is the rack's evictions beyond the oracle's + 1.
func nestedBeyond(r *SoakResult) int { return max(0, r.NestedRackEvicted-r.NestedOracle-1) }
