// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/scheduler/telemetry"
)

// The soak's timeline: period k starts at grid + k*churnInterval. Every
// node's sample is published at its start (sampleTime a whole second);
// the book is compared with the truth at churnCompareAt, a quiet point
// (the samples seen, no pod event since the last period's); pods are
// created at churnCreateAt, started at churnStartAt (startedAt the whole
// second before) and churned at churnChurnAt. Each rule of the book that
// compares times (hold, jump, takenAfter) then has a second or more
// between the events it compares, however the 2-core machine delays them.
const (
	churnPeriods   = 30
	churnCompareAt = 1500 * time.Millisecond
	churnCreateAt  = 1800 * time.Millisecond
	churnStartAt   = 2300 * time.Millisecond
	churnChurnAt   = 3000 * time.Millisecond
	// churnRestartAt is the period whose placements the scheduler is
	// restarted in; churnAgentDown the periods one node's agent is down
	// for, its sample after them taken churnLateBy before it is written.
	churnRestartAt = 12
	churnLateBy    = 4 * time.Second
)

var (
	churnAgentDown = []int{19, 20, 21}
	// churnWaves is how many pods each period creates.
	churnWaves = map[int]int{1: 4, 2: 4, 3: 3, 5: 3, 7: 3, 9: 2, churnRestartAt: 4, 14: 2, 16: 2}
	// churnDeletions is which pod each period deletes: one whose load a
	// sample measured, one pending, or one just started.
	churnDeletions = map[int]string{6: "measured", 10: "pending", 15: "starting", 18: "measured", 20: "pending", 23: "measured"}
)

// TestReservationBookUnderChurn is issue 29's churn soak, on the real API
// server and the real scheduler binary: 4 simulated 16-core nodes of one
// rack (a PowerBudget far above their draw), one with 8 GPUs, whose
// agent and kubelet the test plays. 27 pods are created in waves; each is
// started 0-3 s after its binding (some 15 s, two past the reservation's
// max age); running pods' readiness flaps, their containers restart,
// their labels are patched; pending pods' image pulls fail and retry; six
// pods are deleted (measured, pending, just started); the scheduler is
// restarted during one wave's placement, after containers restarted;
// one node's agent stops for three intervals and then publishes a
// sample taken 4 s earlier.
//
// At every sample, each node's reserved CPU, GPUs and watts on the
// scheduler's /metrics must equal what the truth says is bound and not
// yet shown (churnTruth.reserved: the book's rules replayed on the pods'
// bindings, starts and deletions and the samples, which the test made);
// watts are the node's curve at exactly 50 W a core, so every pod is
// priced exactly, and every calibration ratio must stay within 10 % of 1.
func TestReservationBookUnderChurn(t *testing.T) {
	needControlPlane(t)
	c := newClients(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(29, 1))

	nodes := rack(t, c, "churn", 4, rackNode(churnBasePercent, 180), 6000)
	gpuNode := nodes[3]
	node, err := c.kube.CoreV1().Nodes().Get(ctx, gpuNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("8")
	node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("8")
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	binDir, kubeconfig := binDirAndKubeconfig(t)
	schedArgs := []string{"--reservation-max-age=" + churnMaxAge.String(), "--power-budget-status-interval=500ms",
		"--power-budget-status-deadband-percent=0"}
	sched := startChurnScheduler(t, binDir, kubeconfig, schedArgs...)

	tr := newChurnTruth()
	created := map[string]time.Time{}
	// The pods, planned ahead: 1 or 2 cores, every fifth with a GPU.
	var plan [][]*churnPod
	n := 0
	for k := range churnPeriods {
		var wave []*churnPod
		for range churnWaves[k] {
			p := &churnPod{name: fmt.Sprintf("churn-%02d", n), cpuMilli: 1000, delay: time.Duration(rng.IntN(4)) * time.Second}
			if rng.IntN(3) == 0 {
				p.cpuMilli = 2000
			}
			if n%5 == 2 {
				p.cpuMilli, p.gpus = 1000, 1
			}
			switch n {
			case 3, 9, 19:
				p.delay = 15 * time.Second
			case 5, 14:
				p.delay = 50 * time.Second // past churnMaxAge
			}
			tr.pods[p.name] = p
			wave = append(wave, p)
			n++
		}
		plan = append(plan, wave)
	}

	// The test's watch of bindings.
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace("default"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "telesched-churn=soak" }))
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		p := tr.pods[pod.Name]
		if p == nil || !p.bound.IsZero() {
			return
		}
		p.node, p.bound = pod.Spec.NodeName, now
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				p.scheduled = cond.LastTransitionTime.Time
			}
		}
		if p.scheduled.IsZero() {
			p.scheduled = now.Truncate(time.Second)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer stopWatch()
	factory.Start(watchCtx.Done())
	factory.WaitForCacheSync(watchCtx.Done())

	var stats churnStats
	reportedRatio := map[string]float64{} // a node's ratio out of bounds, reported once per value
	start := time.Now()
	grid := time.Now().Truncate(time.Second).Add(2 * time.Second)
	at := func(k int, off time.Duration) time.Time { return grid.Add(time.Duration(k)*churnInterval + off) }
	sleepUntil := func(when time.Time) { time.Sleep(time.Until(when)) }

	publish := func(k int) {
		for _, name := range nodes {
			if name == nodes[1] && slices.Contains(churnAgentDown, k) {
				continue // its agent restarts
			}
			taken := at(k, 0)
			if name == nodes[1] && slices.Contains(churnAgentDown, k-1) {
				taken = taken.Add(-churnLateBy) // the restarted agent's first sample, late
			}
			tr.mu.Lock()
			cores := tr.load(name, taken)
			tr.mu.Unlock()
			percent, watts := churnLoad(cores)
			st := rackNode(percent, watts)
			st.SampleTime = metav1.NewTime(taken)
			st.IntervalSeconds = int32(churnInterval / time.Second)
			u, err := c.applyStatus(ctx, name, st)
			if err != nil {
				t.Fatalf("publishing %s: %v", name, err)
			}
			s := &churnSample{node: name, taken: taken, observed: time.Now(), cpuPercent: percent, watts: watts, cores: cores}
			for _, mf := range u.GetManagedFields() {
				if mf.Manager == telemetry.AgentFieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "status" && mf.Time != nil {
					s.written = mf.Time.Time
				}
			}
			tr.mu.Lock()
			tr.samples = append(tr.samples, s)
			tr.mu.Unlock()
		}
	}

	compare := func(k int, sched *churnScheduler) {
		when := time.Now()
		fams, err := tryScrape(insecureClient, sched.url+"/metrics")
		if err != nil {
			t.Errorf("period %d: scraping the scheduler: %v", k, err)
			return
		}
		if d := time.Since(when); d > 500*time.Millisecond {
			stats.skip(fmt.Sprintf("period %d: the scrape took %v", k, d))
			return
		}
		time.Sleep(300 * time.Millisecond) // bindings the scheduler reserved before the scrape reach the test's watch
		cpu := churnGauges(fams, "telesched_scheduler_reserved_cpu_cores", "node")
		gpus := churnGauges(fams, "telesched_scheduler_reserved_gpus", "node")
		watts := churnGauges(fams, "telesched_scheduler_reserved_watts", "node")
		ratios := churnGauges(fams, "telesched_scheduler_power_prediction_ratio", "node")
		budget, haveBudget := churnGauges(fams, "telesched_power_budget_reserved_watts", "budget")["churn"]
		var truthWatts, slack float64
		allJudged := true
		for _, name := range nodes {
			truth := tr.reserved(name, when, false)
			unbased := tr.reserved(name, when, true)
			why := truth.ambiguous
			if why == "" && (unbased.cpuMilli != truth.cpuMilli || unbased.gpus != truth.gpus) {
				why = "a rebuilt pod's jump depends on whether the scheduler listed pods before NodeTelemetry"
			}
			tr.mu.Lock()
			for _, p := range tr.pods {
				if p.node == name && p.bound.After(when) && created[p.name].Before(when) {
					why = fmt.Sprintf("%s was bound as the scrape ran", p.name)
				}
			}
			tr.mu.Unlock()
			if why != "" {
				stats.skip(fmt.Sprintf("period %d %s: %s", k, name, why))
				allJudged = false
				continue
			}
			stats.comparisons++
			bookCPU, ok1 := cpu[name]
			bookGPUs, ok2 := gpus[name]
			bookWatts, ok3 := watts[name]
			ratio, calibrated := ratios[name]
			if !calibrated {
				ratio = 1
			}
			want := float64(truth.cpuMilli) / 1000 * churnWattsPerCore
			truthWatts += want
			slack += 2 * math.Abs(ratio-1) * want
			stats.maxTruthMilli = max(stats.maxTruthMilli, truth.cpuMilli)
			cpuErr := churnAbs(int64(math.Round(bookCPU*1000)) - truth.cpuMilli)
			gpuErr := churnAbs(int64(math.Round(bookGPUs)) - truth.gpus)
			wattsErr := math.Abs(bookWatts - want)
			stats.maxCPUMilli, stats.maxGPUs, stats.maxWatts = max(stats.maxCPUMilli, cpuErr), max(stats.maxGPUs, gpuErr), max(stats.maxWatts, wattsErr)
			stats.maxOvercountMilli = max(stats.maxOvercountMilli, int64(math.Round(bookCPU*1000))-tr.unmeasured(name, when))
			var wrong []string
			if !ok1 || !ok2 || !ok3 {
				wrong = append(wrong, fmt.Sprintf("series missing (cpu %v, gpus %v, watts %v)", ok1, ok2, ok3))
			}
			if cpuErr != 0 || gpuErr != 0 {
				wrong = append(wrong, fmt.Sprintf("book %.3f cores %v GPUs, truth %dm %d GPUs (pods %v)", bookCPU, bookGPUs, truth.cpuMilli, truth.gpus, truth.pods))
			}
			// The calibrated estimate scales by the node's ratio, which
			// is bounded below; 0.5 W is the curve's float rounding.
			if tol := 0.5 + math.Abs(ratio-1)*want; wattsErr > tol {
				wrong = append(wrong, fmt.Sprintf("book %.2f W, truth %.0f W (50 W a core, ratio %.3f: tolerance %.2f W)", bookWatts, want, ratio, tol))
			}
			if math.Abs(ratio-1) > 0.10 {
				stats.badRatios++
				if len(wrong) > 0 || reportedRatio[name] != ratio {
					wrong = append(wrong, fmt.Sprintf("calibration ratio %.3f, more than 10 %% from 1 on a node priced exactly", ratio))
				}
				reportedRatio[name] = ratio
			}
			if len(wrong) > 0 {
				stats.failures++
				if stats.failures <= 12 {
					t.Errorf("period %d (%v into the soak), node %s: %s\n%s", k, when.Sub(start).Round(100*time.Millisecond), name,
						strings.Join(wrong, "; "), tr.describe(name, grid, when))
				}
			}
		}
		if allJudged && haveBudget {
			err := math.Abs(budget - truthWatts)
			stats.maxBudgetWatts = max(stats.maxBudgetWatts, err)
			// The domain adds up each node's upper estimate (the mean
			// widened by the ratio's distance from 1) and rounds it up.
			if tol := 1 + slack; err > tol {
				t.Errorf("period %d: rack churn's reserved watts %.0f W, truth %.0f W (tolerance %.2f W)", k, budget, truthWatts, tol)
			}
		}
	}

	for k := range churnPeriods {
		sleepUntil(at(k, 0))
		publish(k)
		sleepUntil(at(k, churnCompareAt))
		if k > 0 {
			compare(k, sched)
		}

		// A wave of pods.
		sleepUntil(at(k, churnCreateAt))
		for _, p := range plan[k] {
			pod := testPod(p.name, "telesched")
			pod.Labels = map[string]string{"telesched-churn": "soak"}
			pod.Spec.NodeSelector = map[string]string{"example.com/rack": "churn"}
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(p.cpuMilli, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("64Mi")}
			if p.gpus > 0 {
				gpu := *resource.NewQuantity(p.gpus, resource.DecimalSI)
				pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = gpu
				pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": gpu}
			}
			created[p.name] = time.Now()
			createTestPod(t, c, pod)
		}

		// The kubelet starts the pods whose images are pulled.
		sleepUntil(at(k, churnStartAt))
		startedAt := at(k, 2*time.Second)
		for _, p := range churnLive(tr) {
			tr.mu.Lock()
			due := !p.bound.IsZero() && p.marked.IsZero() && !time.Now().Before(p.bound.Add(p.delay))
			tr.mu.Unlock()
			if !due {
				continue
			}
			churnKubelet(t, c, p.name, func(pod *corev1.Pod) { churnStart(pod, startedAt) })
			tr.mu.Lock()
			p.marked, p.started = time.Now(), startedAt
			expired := p.marked.Sub(p.bound) > churnMaxAge
			tr.mu.Unlock()
			if expired {
				stats.expiredStarts++
			}
		}

		if k == churnRestartAt {
			// The scheduler restarts while it places this wave: some of
			// its pods are bound, the others wait for the new process.
			sched.stop()
			time.Sleep(500 * time.Millisecond) // the test's watch sees the last bindings
			tr.mu.Lock()
			tr.restarts = append(tr.restarts, time.Now())
			tr.mu.Unlock()
			t.Logf("scheduler restarted in period %d", k)
			sched = startChurnScheduler(t, binDir, kubeconfig, schedArgs...)
			waitFor(t, "the restarted scheduler's book of every node", 60*time.Second, func() bool {
				fams, err := tryScrape(insecureClient, sched.url+"/metrics")
				if err != nil {
					return false
				}
				// Other tests' nodes may share the API server: each of
				// this test's must have its series.
				cpu := churnGauges(fams, "telesched_scheduler_reserved_cpu_cores", "node")
				for _, name := range nodes {
					if _, ok := cpu[name]; !ok {
						return false
					}
				}
				return true
			})
			// The timeline resumes at the next whole second.
			next := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
			grid = next.Add(-time.Duration(k+1) * churnInterval)
			continue
		}

		sleepUntil(at(k, churnChurnAt))
		churnStatus(t, c, tr, rng, k, &stats)
		if kind, ok := churnDeletions[k]; ok {
			if p := churnPickDeletion(tr, kind, time.Now()); p != nil {
				zero := int64(0)
				if err := c.kube.CoreV1().Pods("default").Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
					t.Fatal(err)
				}
				tr.mu.Lock()
				p.deleted = time.Now()
				tr.mu.Unlock()
				stats.deletions++
				t.Logf("period %d: deleted %s (%s) on %s", k, p.name, kind, p.node)
			}
		}
		if k == churnRestartAt-1 {
			// Containers of measured pods restart just before the
			// scheduler does: a new startedAt is no new load. The pods
			// were bound recently enough for the restarted scheduler to
			// list them (within --reservation-max-age).
			forced := 0
			for _, p := range churnLive(tr) {
				tr.mu.Lock()
				ok := !p.started.IsZero() && time.Since(p.started) > 3*churnInterval && time.Since(p.bound) < churnMaxAge-2*churnInterval
				tr.mu.Unlock()
				if ok && forced < 3 {
					churnRestartContainer(t, c, tr, p, at(k, churnChurnAt).Truncate(time.Second))
					t.Logf("period %d: %s's container restarted, before the scheduler restarts", k, p.name)
					stats.restarts++
					forced++
				}
			}
		}
	}

	// The end: every pod started long ago, so every node's book is empty
	// (compared in the last periods above), and the calibrations.
	fams := scrape(t, sched.url+"/metrics")
	ratios := churnGauges(fams, "telesched_scheduler_power_prediction_ratio", "node")
	for _, name := range nodes {
		if r, ok := ratios[name]; ok {
			t.Logf("calibration ratio of %s: %.4f", name, r)
		} else {
			t.Logf("calibration ratio of %s: none measured since the restart", name)
		}
	}
	t.Logf("calibrations by result: %v", churnCounters(fams, "telesched_scheduler_power_calibrations_total", "result"))
	t.Logf("%s", &stats)
	for _, why := range stats.skippedWhy {
		t.Logf("skipped: %s", why)
	}
	if stats.failures > 12 {
		t.Errorf("%d disagreements in all; the first 12 are above", stats.failures)
	}
	if stats.comparisons < 80 || stats.maxTruthMilli == 0 {
		t.Errorf("the soak compared %d times with at most %dm reserved: it tested too little", stats.comparisons, stats.maxTruthMilli)
	}
	for _, name := range nodes {
		if r := tr.reserved(name, time.Now(), false); r.cpuMilli != 0 {
			t.Errorf("%s still has pods reserved at the end (%v): the soak ended too early", name, r.pods)
		}
	}
	if t.Failed() {
		t.Logf("scheduler log (book):\n%s", grepLog(sched.out.String(), "placed pods' watts", "reservation", "calibrat"))
	}
}

func churnAbs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// churnLive are the pods bound and not deleted, by name.
func churnLive(tr *churnTruth) []*churnPod {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []*churnPod
	for _, p := range tr.pods {
		if !p.bound.IsZero() && p.deleted.IsZero() {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *churnPod) int { return strings.Compare(a.name, b.name) })
	return out
}

// churnKubelet updates a pod's status as its kubelet would.
func churnKubelet(t *testing.T, c clients, name string, mutate func(*corev1.Pod)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.kube.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(pod)
		_, err = c.kube.CoreV1().Pods("default").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating %s's status: %v", name, err)
	}
}

// churnCondition sets a condition of a pod's status.
func churnCondition(pod *corev1.Pod, typ corev1.PodConditionType, status corev1.ConditionStatus) {
	now := metav1.Now()
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			if pod.Status.Conditions[i].Status != status {
				pod.Status.Conditions[i].Status, pod.Status.Conditions[i].LastTransitionTime = status, now
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now})
}

// churnStart is the kubelet starting a pod's container at startedAt.
func churnStart(pod *corev1.Pod, startedAt time.Time) {
	started := metav1.NewTime(startedAt)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &started
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, Started: ptr.To(true), Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	for _, typ := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		churnCondition(pod, typ, corev1.ConditionTrue)
	}
}

// churnRestartContainer is a running pod's container exiting and the kubelet
// starting it again at at: the pod stays Running.
func churnRestartContainer(t *testing.T, c clients, tr *churnTruth, p *churnPod, at time.Time) {
	t.Helper()
	churnKubelet(t, c, p.name, func(pod *corev1.Pod) {
		cs := &pod.Status.ContainerStatuses[0]
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error", StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(at)}}
		cs.State.Running.StartedAt = metav1.NewTime(at)
		cs.RestartCount++
	})
	tr.mu.Lock()
	p.restarts++
	tr.mu.Unlock()
}

// churnStatus is the status churn of one period: running pods' readiness
// flaps, containers restart, pending pods' image pulls fail and retry,
// and labels are patched; none of it is a binding, start or end.
func churnStatus(t *testing.T, c clients, tr *churnTruth, rng *rand.Rand, k int, stats *churnStats) {
	t.Helper()
	for _, p := range churnLive(tr) {
		tr.mu.Lock()
		running, restarts := !p.marked.IsZero(), p.restarts
		tr.mu.Unlock()
		switch {
		case running && rng.IntN(10) < 6:
			churnKubelet(t, c, p.name, func(pod *corev1.Pod) {
				ready := corev1.ConditionFalse
				for _, cond := range pod.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionFalse {
						ready = corev1.ConditionTrue
					}
				}
				churnCondition(pod, corev1.PodReady, ready)
				churnCondition(pod, corev1.ContainersReady, ready)
				pod.Status.ContainerStatuses[0].Ready = ready == corev1.ConditionTrue
			})
			stats.flaps++
		case running && restarts < 2 && rng.IntN(10) < 2:
			churnRestartContainer(t, c, tr, p, time.Now().Truncate(time.Second))
			stats.restarts++
		case !running:
			churnKubelet(t, c, p.name, func(pod *corev1.Pod) {
				reason := "ErrImagePull"
				if k%2 == 1 {
					reason = "ImagePullBackOff"
				}
				pod.Status.Phase = corev1.PodPending
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: pod.Spec.Containers[0].Image,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "pulling " + pod.Spec.Containers[0].Image}}}}
				churnCondition(pod, corev1.ContainersReady, corev1.ConditionFalse)
			})
			stats.pulls++
		}
		if rng.IntN(10) < 3 {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"churn-generation":"%d"}}}`, k)
			if _, err := c.kube.CoreV1().Pods("default").Patch(t.Context(), p.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			stats.labels++
		}
	}
}

// churnPickDeletion picks the first pod, by name, of a kind: measured (its
// load in samples for a while), pending, or starting (started last
// period, not shown yet); any live pod when none is of the kind.
func churnPickDeletion(tr *churnTruth, kind string, now time.Time) *churnPod {
	live := churnLive(tr)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range live {
		switch {
		case kind == "measured" && !p.started.IsZero() && now.Sub(p.started) > 4*churnInterval,
			kind == "pending" && p.marked.IsZero(),
			kind == "starting" && !p.started.IsZero() && now.Sub(p.started) < 2*churnInterval:
			return p
		}
	}
	if len(live) > 0 {
		return live[0]
	}
	return nil
}

// describe is a node's history for a failure: its pods' bindings, starts,
// restarts and deletions and its samples, in seconds since grid.
func (tr *churnTruth) describe(node string, grid, until time.Time) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1fs", t.Sub(grid).Seconds())
	}
	var b strings.Builder
	var names []string
	for name, p := range tr.pods {
		if p.node == node {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := tr.pods[name]
		fmt.Fprintf(&b, "  %s %dm %d GPUs: bound %s (scheduled %s), marked running %s (startedAt %s), %d container restarts, deleted %s\n",
			name, p.cpuMilli, p.gpus, rel(p.bound), rel(p.scheduled), rel(p.marked), rel(p.started), p.restarts, rel(p.deleted))
	}
	for _, s := range tr.samples {
		if s.node == node && !s.observed.After(until) && until.Sub(s.observed) < 30*time.Second {
			fmt.Fprintf(&b, "  sample taken %s, observed %s, written %s: %d %% CPU, %d W (%.0f cores of pods)\n",
				rel(s.taken), rel(s.observed), rel(s.written), s.cpuPercent, s.watts, s.cores)
		}
	}
	for _, r := range tr.restarts {
		fmt.Fprintf(&b, "  scheduler restarted at %s\n", rel(r))
	}
	return b.String()
}
