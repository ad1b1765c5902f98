// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sandbox is the embedded demo cluster behind `make demo`: a local
// control plane, the real host and simulated nodes each running the real
// agent, the real telesched-scheduler binary, and a scenario that shows
// where pods go and why.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/telesched/telesched/agent/app"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/sim"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Minute
	// SoakTimeout is what the soak adds to Options.Timeout: it runs
	// about 7 minutes.
	SoakTimeout     = 12 * time.Minute
	DefaultInterval = time.Second
)

// Options configure a sandbox run.
type Options struct {
	// BinDir holds etcd, kube-apiserver and telesched-scheduler; empty
	// resolves as controlplane.ResolveBinDir does.
	BinDir string
	// Dir receives the kubeconfig, the node trees and the logs; empty
	// means a new temporary directory, removed after a successful run
	// without Keep.
	Dir string
	// Keep leaves the cluster up after the scenario until ctx ends.
	Keep bool
	// Timeout bounds the whole run, Keep's wait excepted; with Soak,
	// SoakTimeout more.
	Timeout time.Duration
	// Interval is every agent's sampling interval.
	Interval time.Duration
	// Out receives the progress and the report.
	Out io.Writer
	// Fleet is the simulated fleet and its racks' power budgets; nil runs
	// the default (DefaultFleet).
	Fleet *Fleet
	// Profile is the telesched profile of deploy/scheduler's configuration
	// that schedules the workload: DefaultProfile (balanced) or
	// EnergyProfile.
	Profile string
	// Descheduler runs the after-placement phases without
	// telesched-descheduler (DeschedulerOff), with it (DeschedulerOn), or
	// both, side by side (DeschedulerBoth, the default); DeschedulerSkip
	// skips them.
	Descheduler string
	// DeschedulerInterval and ThermalSustain are the descheduler's
	// --interval and --thermal-sustain, fit to the sandbox's time scale.
	DeschedulerInterval, ThermalSustain time.Duration
	// BudgetSustain is the descheduler's --budget-sustain, fit to the
	// rack phase (rackHold).
	BudgetSustain time.Duration
	// Soak runs the soak (soak.go) after the after-placement phases:
	// telesched-descheduler evicting, two replicas, through churn and
	// faults; a missed goal fails the run.
	Soak bool
	// WorkSpeedup is how many seconds of a job's work the simulation runs
	// in a second: the GPU phase's training jobs end when their work is
	// done at their devices' speed, WorkSpeedup times sooner than they
	// would (DefaultWorkSpeedup when 0).
	WorkSpeedup float64
}

// DefaultWorkSpeedup runs a job's hour of work in a minute: a training
// job ends within the scenario (29 s on H100s, 67 s on A100 40GBs), so a
// job a rack's budget keeps pending can run after it.
const DefaultWorkSpeedup = 60

// DeschedulerSkip skips the after-placement phases.
const DeschedulerSkip = "skip"

// Defaults of the descheduler's flags in the sandbox: its nodes settle in
// seconds (a 6 s thermal time constant), not minutes.
const (
	DefaultDeschedulerInterval = 5 * time.Second
	DefaultThermalSustain      = 10 * time.Second
	DefaultBudgetSustain       = 10 * time.Second
)

// The telesched profiles the sandbox can run the workload under.
const (
	DefaultProfile = "telesched"
	EnergyProfile  = "telesched-energy"
)

// Run starts the sandbox, runs the scenario and reports. With Keep it then
// waits for ctx to end before tearing down.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Soak {
		opts.Timeout += SoakTimeout
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Profile == "" {
		opts.Profile = DefaultProfile
	}
	if opts.Fleet == nil {
		opts.Fleet = DefaultFleet()
	}
	if opts.Descheduler == "" {
		opts.Descheduler = DeschedulerBoth
	}
	if opts.DeschedulerInterval == 0 {
		opts.DeschedulerInterval = DefaultDeschedulerInterval
	}
	if opts.ThermalSustain == 0 {
		opts.ThermalSustain = DefaultThermalSustain
	}
	if opts.BudgetSustain == 0 {
		opts.BudgetSustain = DefaultBudgetSustain
	}
	if opts.WorkSpeedup == 0 {
		opts.WorkSpeedup = DefaultWorkSpeedup
	}
	if opts.WorkSpeedup < 1 || math.IsNaN(opts.WorkSpeedup) || math.IsInf(opts.WorkSpeedup, 0) {
		return nil, fmt.Errorf("--work-speedup %v: want at least 1 (seconds of a job's work a second of the run)", opts.WorkSpeedup)
	}
	switch opts.Descheduler {
	case DeschedulerOff, DeschedulerOn, DeschedulerBoth, DeschedulerSkip:
	default:
		return nil, fmt.Errorf("--descheduler %q: want %s, %s, %s or %s", opts.Descheduler, DeschedulerOn, DeschedulerOff, DeschedulerBoth, DeschedulerSkip)
	}
	if opts.DeschedulerInterval < 0 || opts.ThermalSustain < 0 || opts.BudgetSustain < 0 {
		return nil, fmt.Errorf("--descheduler-interval %v, --thermal-sustain %v and --budget-sustain %v: must not be negative", opts.DeschedulerInterval, opts.ThermalSustain, opts.BudgetSustain)
	}
	if opts.Interval < 100*time.Millisecond {
		return nil, fmt.Errorf("interval %v: must be at least 100ms", opts.Interval)
	}
	binDir, err := controlplane.ResolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	schedulerBin := filepath.Join(binDir, "telesched-scheduler")
	if _, err := os.Stat(schedulerBin); err != nil {
		return nil, fmt.Errorf("%s: %w (run `make build`)", schedulerBin, err)
	}
	dir, cleanup, err := workDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil && !opts.Keep {
			cleanup()
		} else if err != nil {
			fmt.Fprintf(opts.Out, "\nlogs kept in %s\n", filepath.Join(dir, "logs"))
		}
	}()
	logs, err := newLogs(filepath.Join(dir, "logs"))
	if err != nil {
		return nil, err
	}
	defer logs.Close()

	runCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	s := &sandbox{opts: opts, binDir: binDir, dir: dir, logs: logs, start: time.Now(), res: &Result{Rejections: map[string][]string{}, PeakCelsius: map[string]float64{}, Heat: HeatResult{Node: heaterOf(opts.Fleet.Nodes)}, Racks: racksOf(opts.Fleet), Skipped: map[string]string{}}}
	defer s.stop()
	if err := s.run(runCtx, binDir, schedulerBin); err != nil {
		if errors.Is(runCtx.Err(), context.DeadlineExceeded) {
			return s.res, fmt.Errorf("timed out after %v (--timeout) while %s: %w", opts.Timeout, s.step, err)
		}
		return s.res, fmt.Errorf("%s: %w", s.step, err)
	}
	if opts.Keep {
		fmt.Fprintf(opts.Out, "\nThe cluster stays up (--keep); press Ctrl-C to stop it. Try:\n  kubectl --kubeconfig %s get nt\n  kubectl --kubeconfig %s get pods -n demo -o wide\n",
			s.res.Kubeconfig, s.res.Kubeconfig)
		<-ctx.Done()
	}
	return s.res, nil
}

type sandbox struct {
	opts   Options
	binDir string
	dir    string
	logs   *logFiles
	start  time.Time
	step   string
	res    *Result

	cp     *controlplane.ControlPlane
	kube   kubernetes.Interface
	nodes  map[string]*sim.Node
	watch  *watcher
	stops  []func()
	agents sync.WaitGroup
	// agentCtx, kubeconfig and agentRuns are the agents' (startAgents),
	// so that one can be stopped and started again (startAgent).
	agentCtx   context.Context
	kubeconfig string
	agentRuns  map[string]*agentRun
	// soakBudgets are the soak's PowerBudgets' nodes, by name.
	soakBudgets map[string][]string
}

// progress prints a numbered step and remembers it for error messages.
func (s *sandbox) progress(n int, format string, args ...any) {
	s.step = fmt.Sprintf(format, args...)
	steps := 8
	if s.opts.Soak {
		steps = 9
	}
	fmt.Fprintf(s.opts.Out, "[%d/%d] %-64s (%s)\n", n, steps, s.step, time.Since(s.start).Round(100*time.Millisecond))
}

func (s *sandbox) printf(format string, args ...any) { fmt.Fprintf(s.opts.Out, format, args...) }

func (s *sandbox) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

func (s *sandbox) run(ctx context.Context, binDir, schedulerBin string) error {
	s.printf("telesched sandbox: a local control plane, the real host and %d simulated nodes, each read by the real agent,\nscheduled by the real telesched-scheduler. Work directory: %s\n\n", len(s.opts.Fleet.Nodes), s.dir)

	s.progress(1, "starting etcd and kube-apiserver from %s", binDir)
	cp, err := controlplane.Start(controlplane.Options{BinDir: binDir, Output: s.logs.controlPlane})
	if err != nil {
		return err
	}
	s.cp = cp
	s.stops = append(s.stops, func() { _ = cp.Stop() })
	kubeconfig := filepath.Join(s.dir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	s.res.Kubeconfig = kubeconfig
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 200, 400
	s.kube = kubernetes.NewForConfigOrDie(&cfg)

	s.progress(2, "registering the real host and %d simulated nodes", len(s.opts.Fleet.Nodes))
	if err := s.registerNodes(ctx); err != nil {
		return err
	}
	// The watches end before the control plane stops, which would
	// otherwise wait for them.
	watchCtx, stopWatching := context.WithCancel(ctx)
	s.stops = append(s.stops, stopWatching)
	s.watch, err = startWatcher(watchCtx, &cfg, s.nodes, s.res.Heat.Node, s.opts.Interval, s.res)
	if err == nil {
		s.watch.jobs = s.jobEnds()
	}
	if err != nil {
		return err
	}
	err = s.createBudgets(ctx)
	if err != nil {
		return err
	}

	s.progress(3, "starting %d agents (the real collectors, every %v)", len(s.nodes)+1, s.opts.Interval)
	if err := s.startAgents(ctx, kubeconfig); err != nil {
		return err
	}
	if err := s.calibrate(ctx); err != nil {
		return err
	}

	s.progress(4, "starting %s", schedulerBin)
	if err := s.startScheduler(ctx, schedulerBin, kubeconfig); err != nil {
		return err
	}
	if err := s.printTable(ctx, "nodetelemetries", "NodeTelemetry, as `kubectl get nt` prints it"); err != nil {
		return err
	}
	if len(s.res.Racks) > 0 {
		if err := s.waitBudgetStatus(ctx); err != nil {
			return err
		}
		if err := s.printTable(ctx, "powerbudgets", "PowerBudgets, as `kubectl get powerbudgets` prints them"); err != nil {
			return err
		}
	}

	s.progress(5, "baseline: the same workload under the default profile")
	if err := s.baseline(ctx); err != nil {
		return err
	}

	s.progress(6, "scenario: the workload under the %s profile", s.opts.Profile)
	if err := s.scenario(ctx); err != nil {
		return err
	}

	s.progress(7, "summary")
	if err := s.printTable(ctx, "nodetelemetries", "NodeTelemetry at the end"); err != nil {
		return err
	}
	if len(s.res.Racks) > 0 {
		if err := s.printTable(ctx, "powerbudgets", "PowerBudgets at the end"); err != nil {
			return err
		}
	}
	s.summary()
	if s.opts.Descheduler != DeschedulerSkip {
		s.progress(8, "after placement: --descheduler=%s", s.opts.Descheduler)
		if err := s.afterPhases(ctx); err != nil {
			return err
		}
	}
	if s.opts.Soak {
		s.progress(9, "soak: the descheduler evicting through churn and faults")
		if err := s.soakPhase(ctx); err != nil {
			return err
		}
	}
	if err := s.res.afterVerdict(); err != nil {
		return err
	}
	if err := s.res.Soak.soakVerdict(); err != nil {
		return err
	}
	return s.res.unitsVerdict()
}

// registerNodes creates the Node objects: the real host (tainted, so the
// demo shows its telemetry without placing pods on a machine that runs
// none) and the simulated fleet.
func (s *sandbox) registerNodes(ctx context.Context) error {
	s.nodes = map[string]*sim.Node{}
	for _, spec := range s.opts.Fleet.Nodes {
		n, err := sim.NewNode(filepath.Join(s.dir, "nodes", spec.Name), spec)
		if err != nil {
			return err
		}
		s.nodes[spec.Name] = n
		// The kubelet's pod-resources API, where the agent reads which
		// devices the node's pods hold.
		stop, err := n.ServePodResources(app.DefaultPodResourcesSocket)
		if err != nil {
			return err
		}
		s.stops = append(s.stops, stop)
		res := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(spec.Host.CPUs), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(spec.Host.MemoryKiB<<10, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		}
		for name, q := range gpuAllocatable(spec) {
			res[name] = q
		}
		labels := map[string]string{"telesched.io/sandbox": "simulated"}
		if spec.Rack != "" {
			labels[RackLabel] = spec.Rack
		}
		if spec.MIGStrategy != "" {
			labels[migStrategyLabel] = spec.MIGStrategy
		}
		if err := s.createNode(ctx, spec.Name, labels, res, nil); err != nil {
			return err
		}
		if spec.DRA && len(spec.GPUs) > 0 {
			if err := s.publishDRA(ctx, spec); err != nil {
				return err
			}
		}
		rack := ""
		if spec.Rack != "" {
			rack = "rack " + spec.Rack + ": "
		}
		s.printf("      %-14s %s%s\n", spec.Name, rack, spec.Role)
	}
	s.res.RealHost = realHostName()
	mem, err := hostMemoryBytes()
	if err != nil {
		return fmt.Errorf("the real host: %w", err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	taint := []corev1.Taint{{Key: "telesched.io/sandbox-real-host", Effect: corev1.TaintEffectNoSchedule}}
	if err := s.createNode(ctx, s.res.RealHost, map[string]string{"telesched.io/sandbox": "real"}, res, taint); err != nil {
		return err
	}
	s.printf("      %-14s this machine: its agent reads the real /proc and /sys (shown, not scheduled to)\n", s.res.RealHost)
	return nil
}

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

func (s *sandbox) createNode(ctx context.Context, name string, labels map[string]string, res corev1.ResourceList, taints []corev1.Taint) error {
	labels["kubernetes.io/hostname"] = name
	node, err := s.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	// Admission adds the not-ready taint; no node controller runs here to
	// lift it.
	node.Spec.Taints = taints
	if node, err = s.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "SandboxReady", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}
	if _, err := s.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}

// startAgents runs one real agent per node, in this process: simulated
// nodes read their trees and mock GPUs, the real host reads / and the
// system's NVML library if it has one.
func (s *sandbox) startAgents(ctx context.Context, kubeconfig string) error {
	agentCtx, cancel := context.WithCancel(ctx)
	s.stops = append(s.stops, func() { cancel(); s.agents.Wait() })
	// The simulated trees advance on their own clock,
	// sim.StepsPerInterval times per sampling interval. The stop waits
	// for this goroutine too: the trees are removed after it.
	s.agents.Add(1)
	go func() {
		defer s.agents.Done()
		t := time.NewTicker(s.opts.Interval / sim.StepsPerInterval)
		defer t.Stop()
		for {
			select {
			case <-agentCtx.Done():
				return
			case <-t.C:
				for _, n := range s.nodes {
					if err := n.Step(); err != nil {
						klog.FromContext(ctx).Error(err, "advancing a simulated node", "node", n.Spec.Name)
					}
				}
			}
		}
	}()
	s.agentCtx, s.kubeconfig, s.agentRuns = agentCtx, kubeconfig, map[string]*agentRun{}
	for _, n := range s.sortedNodes() {
		if err := s.startAgent(n.Spec.Name, nil); err != nil {
			return err
		}
	}
	return s.startAgent(s.res.RealHost, nil)
}

// agentRun is one node's running agent: cancel stops it, done closes
// when it has.
type agentRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startAgent starts the agent of node name (a simulated node, or the real
// host) with the sandbox's settings, then configure's.
func (s *sandbox) startAgent(name string, configure func(*app.Options)) error {
	o := app.NewOptions()
	o.NodeName, o.HostRoot, o.Kubeconfig, o.Interval = name, "/", s.kubeconfig, s.opts.Interval
	o.MetricsAddress, o.HealthAddress = "", ""
	// The scenario's heat phase shows EnergyAware refusing the heater
	// and requeueing its pinned pod as the node cools; the overheating
	// taint would refuse it first and hold it for --overheating-taint-hold
	// after. test/integration's TestOverheatingTaint* cover the taint; the
	// soak (soak.go) turns it on for the heater.
	o.OverheatingTaint = false
	// Publish on every meaningful change, at most twice a second.
	o.Publisher.RateLimitQPS, o.Publisher.RateLimitBurst = 2, 4
	o.Publisher.BackoffMax = 5 * time.Second
	o.PowerModel.MinSamples = 8
	// The ramp gives 93 samples of changing power; learn from the
	// last 60 of them.
	o.ThermalModel.MinSamples, o.ThermalModel.Memory = 30, 60
	if n := s.nodes[name]; n != nil {
		o.HostRoot = n.Dir
		o.NVMLLibrary = n.NVML()
		o.NVML = o.NVMLLibrary != nil
		ctx := s.agentCtx
		o.BeforeHostRead = func(hostPath string) {
			if err := n.BeforeRead(hostPath); err != nil {
				klog.FromContext(ctx).Error(err, "advancing a simulated node", "node", n.Spec.Name)
			}
		}
	}
	if configure != nil {
		configure(o)
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("agent for %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(s.agentCtx)
	run := &agentRun{cancel: cancel, done: make(chan struct{})}
	s.agentRuns[name] = run
	s.agents.Add(1)
	go func() {
		defer s.agents.Done()
		defer close(run.done)
		logger := klog.NewKlogr().WithValues("node", name)
		if err := app.Run(klog.NewContext(ctx, logger), o, io.Discard); err != nil && ctx.Err() == nil {
			logger.Error(err, "agent stopped")
		}
	}()
	return nil
}

// stopAgent stops node name's agent, as a crash would (it publishes
// nothing more), and waits for it to end.
func (s *sandbox) stopAgent(name string) {
	if run := s.agentRuns[name]; run != nil {
		run.cancel()
		<-run.done
		delete(s.agentRuns, name)
	}
}

func (s *sandbox) sortedNodes() []*sim.Node {
	out := make([]*sim.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

// calibrate sweeps every simulated node's background load for a few
// seconds, as a day of work would, so each agent's power model sees a
// range of utilization and becomes ready; then it waits for every node's
// telemetry (and the simulated nodes' power models).
func (s *sandbox) calibrate(ctx context.Context) error {
	levels := sim.CalibrationRamp()
	s.printf("      ramping the simulated nodes' load 5%% to 80%% and back (%d samples) so each agent learns its power curve and thermal model; waiting for every node's telemetry\n", len(levels)*sim.CalibrationHold)
	for _, u := range levels {
		for _, n := range s.nodes {
			n.Sweep(u)
		}
		if err := sleep(ctx, sim.CalibrationHold*s.opts.Interval); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		n.EndSweep()
	}
	// Samples that measure the nodes back at their own load.
	settled := time.Now().Add(s.opts.Interval)
	waitCtx, cancel := context.WithTimeout(ctx, calibrationTimeout)
	defer cancel()
	var missing []string
	err := s.watch.waitFor(waitCtx, "every node's NodeTelemetry, with power models on the simulated nodes", func(v *view) bool {
		missing = missing[:0]
		if _, ok := v.telemetry[s.res.RealHost]; !ok {
			missing = append(missing, s.res.RealHost+" (no NodeTelemetry)")
		}
		for _, n := range s.sortedNodes() {
			switch t, ok := v.telemetry[n.Spec.Name]; {
			case !ok:
				missing = append(missing, n.Spec.Name+" (no NodeTelemetry)")
			case !t.ModelReady:
				missing = append(missing, n.Spec.Name+" (power model not ready)")
			case t.SampleTime.Before(settled):
				missing = append(missing, n.Spec.Name+" (no sample since the sweep)")
			}
		}
		return len(missing) == 0
	})
	if err != nil {
		return fmt.Errorf("%w; still missing: %s (see %s)", err, strings.Join(missing, ", "), s.logs.agents.Name())
	}
	// Thermal models: a node without one is judged on its temperature now,
	// so the scenario goes on without it, and says so.
	thermalCtx, cancelThermal := context.WithTimeout(ctx, thermalModelWait)
	defer cancelThermal()
	var noModel []string
	if err := s.watch.waitFor(thermalCtx, "the simulated nodes' thermal models", func(v *view) bool {
		noModel = noModel[:0]
		for _, n := range s.sortedNodes() {
			if t := v.telemetry[n.Spec.Name]; t == nil || t.Models == nil || !t.Models.HasThermal {
				noModel = append(noModel, n.Spec.Name)
			}
		}
		return len(noModel) == 0
	}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.printf("      no thermal model yet on %s: judged on their temperature now until their agents learn one\n", strings.Join(noModel, ", "))
	}
	// Peak temperatures and racks' watts count from here: the sweep's heat
	// and load are not the scheduler's doing.
	s.watch.update(func(v *view) {
		clear(s.res.PeakCelsius)
		for name, t := range v.telemetry {
			if t.HasThermal {
				s.res.PeakCelsius[name] = float64(t.HottestMilli) / 1000
			}
		}
		for i := range s.res.Racks {
			s.res.Racks[i].PeakWatts = 0
		}
		s.watch.rackPeaks(v)
	})
	return nil
}

// thermalModelWait bounds the wait for the simulated nodes' thermal
// models after calibration.
const thermalModelWait = 20 * time.Second

// calibrationTimeout bounds the wait for every node's first telemetry.
const calibrationTimeout = 90 * time.Second

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// realHostName is this machine's hostname as a Node name.
func realHostName() string {
	h, err := os.Hostname()
	h = strings.ToLower(h)
	if err != nil || len(validation.IsDNS1123Subdomain(h)) > 0 {
		return "real-host"
	}
	return h
}

func hostMemoryBytes() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kib int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil {
			return kib << 10, nil
		}
	}
	return 0, errors.New("/proc/meminfo has no MemTotal")
}

func workDir(dir string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		abs, err := filepath.Abs(dir)
		return abs, func() {}, err
	}
	d, err := os.MkdirTemp("", "telesched-sandbox-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}
