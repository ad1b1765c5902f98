// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/telesched/telesched/agent"
	"github.com/telesched/telesched/agent/collector"
	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/kube"
	"github.com/telesched/telesched/agent/metrics"
	"github.com/telesched/telesched/agent/nvml"
	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/agent/speed"
	"github.com/telesched/telesched/agent/status"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
	"github.com/telesched/telesched/internal/version"
)

// requestTimeout bounds every API request of the agent.
const requestTimeout = 30 * time.Second

// Event reasons on the Node.
const (
	EventNodeOverheating       = "NodeOverheating"
	EventNodeTemperatureNormal = "NodeTemperatureNormal"
	EventGPUThermalThrottling  = "GPUThermalThrottling"
)

// sources is the explicit, ordered list of collectors. Order matters: NUMA
// reads the CPU collector's per-CPU figures, power adds the GPUs' watts,
// pod resources adds to the NUMA nodes.
func sources(o *Options, root hostfs.Root) []collector.Collector {
	list := []collector.Collector{
		collector.NewCPUCollector(root).WithThrottleInterval(o.ThrottleInterval),
		collector.NewMemoryCollector(root),
		collector.NewNUMACollector(root),
		collector.NewThermalCollector(root).WithSensorHold(o.SensorHold),
	}
	if o.NVML {
		lib := o.NVMLLibrary
		if lib == nil {
			lib = nvml.New()
		}
		list = append(list, collector.NewGPUCollector(lib, root).WithTimeout(o.NVMLTimeout).WithTopologyInterval(o.GPUTopologyInterval))
	}
	return append(list,
		collector.NewPowerCollector(root).WithRAPLRelay(o.PowercapRelay),
		collector.NewPodResourcesCollector(root, o.PodResources).WithGPUResources(o.GPUResources),
	)
}

// resumeModels resumes the power and thermal models this node's agent
// learned before it restarted: from the state file (--state-file) when it
// can be read, else from the node's NodeTelemetry (client nil: none), whose
// fitted curve and thermal model are a coarser start. Without either the
// models start afresh; the log says which. It never fails the start.
func resumeModels(ctx context.Context, o *Options, client *kube.Client, sampler *agent.Sampler) {
	logger := klog.FromContext(ctx)
	if o.StateFile != "" {
		st, err := readState(o.StateFile)
		switch {
		case err == nil && sampler.RestoreState(o.NodeName, st):
			logger.Info("resumed the power and thermal models from the state file", "path", o.StateFile,
				"powerModelBins", len(st.PowerBins), "thermalModel", st.Thermal != nil, "savedAt", time.Unix(st.WrittenUnix, 0))
			return
		case err == nil:
			logger.Info("ignoring a state file of another version or node", "path", o.StateFile, "version", st.Version, "node", st.Node)
		case !errors.Is(err, fs.ErrNotExist):
			logger.Info("could not read the state file", "path", o.StateFile, "err", err)
		}
	}
	if client == nil {
		return
	}
	path := "/apis/" + telemetryv1alpha1.GroupName + "/" + telemetryv1alpha1.SchemeGroupVersion.Version + "/nodetelemetries/" + o.NodeName
	raw, err := client.GetRaw(ctx, path)
	if err != nil {
		logger.Info("starting the power and thermal models afresh: no state file and no previous NodeTelemetry", "err", err)
		return
	}
	var nt telemetryv1alpha1.NodeTelemetry
	if err := json.Unmarshal(raw, &nt); err != nil {
		logger.Info("starting the power and thermal models afresh: the previous NodeTelemetry does not decode", "err", err)
		return
	}
	sampler.Restore(&nt.Status)
	logger.Info("resumed the power and thermal models from the previous NodeTelemetry (no state file)")
}

// readState reads a state file.
func readState(path string) (agent.State, error) {
	var st agent.State
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// writeState saves the models' state, replacing the file by rename so a
// crash never leaves half a file.
func writeState(path string, st agent.State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// closeCollectors releases what collectors hold (NVML, the kubelet socket).
func closeCollectors(list []collector.Collector) {
	for _, c := range list {
		if closer, ok := c.(interface{ Close() }); ok {
			closer.Close()
		}
	}
}

// Run runs the agent until ctx ends, or takes one sample with --once.
func Run(ctx context.Context, o *Options, stdout io.Writer) error {
	root := hostfs.New(o.HostRoot)
	if o.HostDirFDs > 0 {
		hostfs.SetDirFDLimit(o.HostDirFDs)
		root = root.WithDirCache()
		defer root.Close()
	}
	if o.BeforeHostRead != nil {
		root = root.WithReadHook(o.BeforeHostRead)
	}
	list := sources(o, root)
	defer closeCollectors(list)
	// intervalSeconds is the window the sample's rates cover.
	window, windows := o.SampleInterval, o.Window
	if o.Once {
		// One sample makes no window.
		window, windows = o.OnceWindow, 0
	}
	sampler, err := agent.NewSampler(agent.SamplerConfig{
		Collectors:   list,
		Interval:     window,
		AgentVersion: version.Get(),
		PowerModel:   o.PowerModel,
		ThermalModel: o.ThermalModel,
		Heat:         o.Heat,
		Window:       windows,
		Speed:        o.Speed,
		CPUModel:     collector.CPUModel(root),
	})
	if err != nil {
		return err
	}
	if o.Once {
		return once(ctx, o, sampler, stdout)
	}
	return loop(ctx, o, sampler)
}

// once primes the rate-based collectors, waits --once-window, samples and
// prints the NodeTelemetry the agent would publish.
func once(ctx context.Context, o *Options, sampler *agent.Sampler, stdout io.Writer) error {
	sampler.Observe(ctx, time.Now())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.OnceWindow):
	}
	obs := sampler.Observe(ctx, time.Now())
	for _, src := range obs.Status.Sources {
		if src.State != telemetryv1alpha1.SourceAvailable || src.Reason != "" {
			// Its fields are absent from the output, or in part.
			klog.FromContext(ctx).Info("Source not fully read", "source", src.Name, "state", src.State, "reason", src.Reason, "message", src.Message)
		}
	}
	var err error
	name := o.NodeName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return fmt.Errorf("--node-name not set and no hostname: %w", err)
		}
	}
	nt := telemetryv1alpha1.NodeTelemetry{
		TypeMeta:   metav1.TypeMeta{APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(), Kind: "NodeTelemetry"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     obs.Status,
	}
	var out []byte
	if o.Output == "yaml" {
		out, err = yaml.Marshal(nt)
	} else {
		out, err = json.MarshalIndent(nt, "", "  ")
		out = append(out, '\n')
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// loop samples every --sample-interval and feeds every sample to /metrics
// and the heat events. The publisher sees every sample through a
// publisher.Settler: a move past the deadbands is written once two samples
// in a row agree (the first sample after a change on the host straddles it
// and reads a value halfway), or --interval after it was first seen. So a
// change reaches the API server about two samples after it happens, written
// once, at the value it settled at. /healthz fails once no sample has
// completed for --healthz-missed-intervals × --interval (see liveness).
func loop(ctx context.Context, o *Options, sampler *agent.Sampler) error {
	logger := klog.FromContext(ctx)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, version.Get())

	var pub *publishing
	var events *nodeEvents
	var taint *NodeTaint
	if o.Publish {
		client, err := newClient(o.Kubeconfig, o.WrapTransport)
		if err != nil {
			return err
		}
		if pub, err = newPublishing(o, client, clock.RealClock{}); err != nil {
			return err
		}
		events = newNodeEvents(ctx, client, o.NodeName)
		defer events.shutdown()
		if o.OverheatingTaint {
			taint = NewNodeTaint(ctx, client, o.NodeName, o.Heat, o.OverheatingTaintHold, o.Publisher.BackoffInitial, o.Publisher.BackoffMax, o.OverheatingConditionHeartbeat, clock.RealClock{},
				func(ev kube.Event) {
					if events.queueEvent(ev) {
						m.Event(ev.Reason)
					}
				})
			// Before events.shutdown: its last Event is still sent.
			defer taint.Shutdown()
		} else if err := ClearOverheatingTaint(ctx, client, o.NodeName, time.Now()); err != nil {
			// Without patch on Nodes (an install without the taint's
			// grant) an earlier agent's taint cannot be there either,
			// unless an operator took the grant away after it.
			klog.FromContext(ctx).Error(err, "clearing an earlier agent's overheating taint and condition (--overheating-taint=false)", "node", o.NodeName)
		}
		resumeModels(ctx, o, client, sampler)
		nodeSpeed(ctx, o, client, sampler)
	} else {
		resumeModels(ctx, o, nil, sampler)
	}
	var savedState time.Time
	saveState := func(now time.Time) {
		if o.StateFile == "" {
			return
		}
		if err := writeState(o.StateFile, sampler.State(o.NodeName, now)); err != nil {
			logger.Error(err, "saving the models' state failed", "path", o.StateFile)
		}
		savedState = now
	}
	defer func() { saveState(time.Now()) }()

	// Unix nanos; failingSince is the first failed write since the last
	// success, 0 while writes succeed.
	var lastSample, lastPublish, failingSince atomic.Int64
	live := newLiveness(clock.RealClock{}, o.HealthzMissedIntervals, o.Interval)
	readyFn := func() error {
		return ready(o, time.Now(), time.Unix(0, lastSample.Load()), time.Unix(0, lastPublish.Load()), failingSince.Load())
	}
	if o.MetricsAddress != "" {
		srv, err := serveMetrics(ctx, o.MetricsAddress, o.MetricsMaxConnections, reg)
		if err != nil {
			return err
		}
		defer shutdownServer(srv)
		logger.Info("serving metrics", "address", o.MetricsAddress)
	}
	if o.HealthAddress != "" {
		srv, err := serveHealth(ctx, o.HealthAddress, live, readyFn)
		if err != nil {
			return err
		}
		defer shutdownServer(srv)
		logger.Info("serving /healthz and /readyz", "address", o.HealthAddress)
	}

	logger.Info("starting", "version", version.Get(), "node", o.NodeName, "hostRoot", o.HostRoot,
		"sampleInterval", o.SampleInterval, "interval", o.Interval, "heartbeat", o.Publisher.Heartbeat, "publish", o.Publish)

	// The publisher runs on its own goroutine and always takes the latest
	// status, so a slow or unreachable API server never delays sampling,
	// metrics or events. A sample replaced while a write is in flight is
	// skipped; the Settler compares the samples it does see.
	latest := make(chan *telemetryv1alpha1.NodeTelemetryStatus, 1)
	publisherDone := make(chan struct{})
	go func() {
		defer close(publisherDone)
		if pub == nil {
			return
		}
		undeclared := "" // the fields the last write left out, as logged
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-latest:
				out := pub.offer(ctx, st)
				m.Published(out, time.Now())
				if u := strings.Join(out.Undeclared, " "); out.Published && u != undeclared {
					logUndeclared(logger, out.Undeclared)
					undeclared = u
				}
				switch {
				case out.Err != nil && ctx.Err() != nil:
					return // stopping: the write was cut short, not failed
				case out.Err != nil:
					failingSince.CompareAndSwap(0, time.Now().UnixNano())
					logger.Error(out.Err, "publishing NodeTelemetry failed; backing off")
				case out.Published:
					lastPublish.Store(time.Now().UnixNano())
					failingSince.Store(0)
					logger.V(2).Info("published NodeTelemetry", "reason", out.Reason, "recreated", out.Recreated, "duration", out.Duration)
				default:
					logger.V(4).Info("not publishing", "reason", out.Reason)
				}
			}
		}
	}()
	defer func() { <-publisherDone }()

	last := time.Now()
	sampler.Observe(ctx, last) // baseline for rate-based collectors
	live.sampled()
	ticker := time.NewTicker(o.SampleInterval)
	defer ticker.Stop()
	failing := map[telemetryv1alpha1.SourceName]string{}
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopping")
			return nil
		case <-ticker.C:
			// The time the loop woke, not the tick's: a loop that wakes
			// late reads its sensors late, and the thermal model steps
			// over the time between the reads.
			now := time.Now()
			if now.Sub(last) < o.SampleInterval/2 {
				// A tick the ticker held while the loop was busy: sampling
				// now would measure rates over a sliver of time.
				continue
			}
			last = now
			obs := sampler.Observe(ctx, now)
			live.sampled()
			lastSample.Store(now.UnixNano())
			m.Observe(&obs)
			logSources(logger, obs.Sample.Sources, failing)
			if events != nil {
				for _, reason := range events.record(&obs) {
					m.Event(reason)
				}
			}
			if taint != nil {
				taint.Update(now, obs.Heat)
			}
			if pub != nil {
				offerLatest(latest, &obs.Status)
			}
			if now.Sub(savedState) >= o.StateEvery {
				saveState(now)
			}
		}
	}
}

// nodeSpeed reads the Node's label speed.NodeLabel, the operator's CPU
// core speed for this node, above --cpu-core-speed-milli and every table.
// A label that is not a number in range is logged and left aside: one
// node's typo does not stop its agent, and status.speed says which source
// it used.
func nodeSpeed(ctx context.Context, o *Options, client *kube.Client, sampler *agent.Sampler) {
	logger := klog.FromContext(ctx)
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	n, err := client.GetNode(rctx, o.NodeName)
	cancel()
	if err != nil {
		logger.Error(err, "reading the Node's labels for its CPU speed; going by --cpu-core-speed-milli and the tables", "node", o.NodeName, "label", speed.NodeLabel)
		return
	}
	milli, ok, err := speed.FromNodeLabel(n.Labels)
	switch {
	case err != nil:
		logger.Error(err, "ignoring the Node's CPU speed label; going by --cpu-core-speed-milli and the tables", "node", o.NodeName)
	case ok:
		sampler.SetCPUCoreSpeed(milli, "Node label "+speed.NodeLabel)
		logger.Info("CPU core speed from the Node's label", "node", o.NodeName, "label", speed.NodeLabel, "milli", milli)
	}
}

// logUndeclared says which status fields the cluster's NodeTelemetry CRD
// lacks, and so are not published, or that it has them all again.
func logUndeclared(logger klog.Logger, fields []string) {
	if len(fields) == 0 {
		logger.Info("the NodeTelemetry CRD declares every status field this agent writes again; publishing them all")
		return
	}
	logger.Error(nil, "the NodeTelemetry CRD in this cluster is older than this agent and lacks status fields it writes; "+
		"publishing the rest without them until the CRDs are upgraded: kubectl apply --server-side -k deploy/crds, or helm upgrade (docs/install.md, \"Upgrade and uninstall\")",
		"fields", fields)
}

// publishing is the publisher's side of the loop: a Settler in front of
// the Publisher. It is not safe for concurrent use.
type publishing struct {
	settler *publisher.Settler
	pub     *publisher.Publisher
}

func newPublishing(o *Options, client *kube.Client, clk clock.Clock) (*publishing, error) {
	pub, err := publisher.New(o.Publisher, client, clk)
	if err != nil {
		return nil, err
	}
	return &publishing{
		settler: publisher.NewSettler(o.Publisher.Deadbands, o.Publisher.Heartbeat, o.Interval, clk),
		pub:     pub,
	}, nil
}

// offer takes the status of every sample, in order, and writes it when it
// has settled and the Publisher finds it worth a write.
func (p *publishing) offer(ctx context.Context, st *telemetryv1alpha1.NodeTelemetryStatus) publisher.Outcome {
	if why := p.settler.Hold(st); why != "" {
		return publisher.Outcome{Reason: why}
	}
	out := p.pub.Offer(ctx, st)
	if out.Published {
		p.settler.Published(st, p.pub.LastPublished())
	}
	return out
}

// offerLatest puts st in the one-slot channel, replacing a status the
// publisher has not taken yet.
func offerLatest(ch chan *telemetryv1alpha1.NodeTelemetryStatus, st *telemetryv1alpha1.NodeTelemetryStatus) {
	for {
		select {
		case ch <- st:
			return
		default:
			select {
			case <-ch:
			default:
			}
		}
	}
}

// logSources logs a source's state when it changes, not every cycle; for a
// source read in part (Degraded), also when what its message names changes.
func logSources(logger klog.Logger, sources []telemetryv1alpha1.SourceStatus, seen map[telemetryv1alpha1.SourceName]string) {
	for _, s := range sources {
		key := string(s.State) + "/" + s.Reason
		partly := s.State == telemetryv1alpha1.SourceAvailable && s.Reason != ""
		if partly {
			key += "/" + s.Message
		}
		if seen[s.Name] == key {
			continue
		}
		seen[s.Name] = key
		switch {
		case partly:
			logger.Info("source read in part", "source", s.Name, "reason", s.Reason, "message", s.Message)
		case s.State == telemetryv1alpha1.SourceAvailable:
			logger.Info("source available", "source", s.Name)
		default:
			logger.Info("source not available", "source", s.Name, "state", s.State, "reason", s.Reason, "message", s.Message)
		}
	}
}

// ready: a sample within three intervals and, when publishing, a write
// within the heartbeat plus three intervals and no write failing for
// longer than three intervals. The scheduler counts a node whose agent pod
// is Ready as having fresh telemetry for --telemetry-max-age-ready-agent
// (longer than the heartbeat), so Ready must mean that the last write
// still holds: the agent samples, and a move past a deadband gets written.
func ready(o *Options, now, lastSample, lastPublish time.Time, failingSince int64) error {
	if now.Sub(lastSample) > 3*o.Interval {
		return fmt.Errorf("no sample since %v", lastSample.Format(time.RFC3339))
	}
	if !o.Publish {
		return nil
	}
	if now.Sub(lastPublish) > o.Publisher.Heartbeat+3*o.Interval {
		return fmt.Errorf("no NodeTelemetry write since %v", lastPublish.Format(time.RFC3339))
	}
	if failingSince != 0 {
		if since := time.Unix(0, failingSince); now.Sub(since) > 3*o.Interval {
			return fmt.Errorf("NodeTelemetry writes failing since %v (the log says why)", since.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// serveMetrics serves /metrics on addr, holding at most maxConns
// connections open: a scrape takes milliseconds, and the cap keeps a flood
// of clients from costing the agent more than maxConns goroutines and
// sockets.
func serveMetrics(ctx context.Context, addr string, maxConns int, reg *prometheus.Registry) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return listenAndServe(ctx, "--metrics-bind-address", addr, maxConns, mux)
}

// serveHealth serves /healthz (healthz: 503 while no sample completes) and
// /readyz (readyFn) on addr. It has a listener of its own, outside the
// metrics server's connection cap: clients that hold every metrics
// connection open (idle, slow or hostile) must not queue the kubelet's
// probes behind them, or the liveness probe times out and restarts an
// agent that is sampling fine.
func serveHealth(ctx context.Context, addr string, healthz http.Handler, readyFn func() error) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/healthz", healthz)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := readyFn(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return listenAndServe(ctx, "--health-probe-bind-address", addr, 0, mux)
}

// listenAndServe serves h on addr (the value of flag) with the metrics
// server's timeouts, holding at most maxConns connections open (0: no
// cap).
func listenAndServe(ctx context.Context, flag, addr string, maxConns int, h http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	srv := newMetricsServer(h)
	if maxConns > 0 {
		ln = netutil.LimitListener(ln, maxConns)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "HTTP server stopped", "flag", flag, "address", addr)
		}
	}()
	return srv, nil
}

// metricsLimits are the timeouts of the metrics and health servers: a
// scrape of the agent's few hundred series or a probe takes milliseconds,
// so a client this slow is stuck or hostile, and its connection is better
// given to the next scrape or probe.
var metricsLimits = struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes                int
}{5 * time.Second, 10 * time.Second, 30 * time.Second, 60 * time.Second, 16 << 10}

func newMetricsServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: metricsLimits.readHeader,
		ReadTimeout:       metricsLimits.read,
		WriteTimeout:      metricsLimits.write,
		IdleTimeout:       metricsLimits.idle,
		MaxHeaderBytes:    metricsLimits.maxHeaderBytes,
	}
}

func shutdownServer(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

func newClient(kubeconfig string, wrap func(http.RoundTripper) http.RoundTripper) (*kube.Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading client config (--kubeconfig %q): %w", kubeconfig, err)
	}
	cfg.UserAgent = "telesched-agent/" + version.Get()
	// A hung connection must not hold the publisher forever.
	cfg.Timeout = requestTimeout
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	return kube.New(cfg)
}

// maxEventMessage bounds an Event's message (events.k8s.io's note is at
// most 1 kB).
const maxEventMessage = 1024

// nodeEvents records heat events on the Node. Events are sent from a
// goroutine of their own so a slow API server never delays sampling; they
// are rare (state changes, with hysteresis), so they need no spam filter.
type nodeEvents struct {
	client *kube.Client
	node   string
	queue  chan kube.Event
	done   chan struct{}
}

func newNodeEvents(ctx context.Context, client *kube.Client, node string) *nodeEvents {
	e := &nodeEvents{client: client, node: node, queue: make(chan kube.Event, 16), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		logger := klog.FromContext(ctx)
		// Events queued when the agent stops are still sent, each within
		// the request timeout.
		sendCtx := context.WithoutCancel(ctx)
		for ev := range e.queue {
			ctx, cancel := context.WithTimeout(sendCtx, requestTimeout)
			if err := e.client.CreateEvent(ctx, ev, time.Now()); err != nil {
				logger.Error(err, "recording event", "reason", ev.Reason)
			}
			cancel()
		}
	}()
	return e
}

// record queues the events an observation calls for and returns their
// reasons.
func (e *nodeEvents) record(obs *agent.Observation) []string {
	var events []kube.Event
	if obs.Heat.Changed && obs.Heat.Known {
		if obs.Heat.Hot {
			events = append(events, kube.Event{Type: kube.EventTypeWarning, Reason: EventNodeOverheating, Message: obs.Heat.Message})
		} else {
			events = append(events, kube.Event{Type: kube.EventTypeNormal, Reason: EventNodeTemperatureNormal, Message: obs.Heat.Message})
		}
	}
	if gpus := obs.GPUsStartedThrottling; len(gpus) > 0 {
		var parts []string
		for _, g := range gpus {
			parts = append(parts, fmt.Sprintf("GPU %d (%s, %s) at %s: %v", g.Index, g.Model, g.UUID, status.GPUTemperature(g), g.ThrottleReasons))
		}
		msg := fmt.Sprintf("%d GPU(s) started throttling for heat: %s", len(gpus), strings.Join(parts, "; "))
		events = append(events, kube.Event{Type: kube.EventTypeWarning, Reason: EventGPUThermalThrottling, Message: text.Truncate(msg, maxEventMessage)})
	}
	var reasons []string
	for _, ev := range events {
		if e.queueEvent(ev) {
			reasons = append(reasons, ev.Reason)
		}
	}
	return reasons
}

// queueEvent queues an Event about the Node; false when the queue is full
// and the Event dropped. Safe for concurrent use.
func (e *nodeEvents) queueEvent(ev kube.Event) bool {
	ev.Node, ev.Component = e.node, "telesched-agent"
	select {
	case e.queue <- ev:
		return true
	default:
		klog.Background().Info("event queue full; dropping event", "reason", ev.Reason)
		return false
	}
}

// shutdown sends the queued events and stops.
func (e *nodeEvents) shutdown() {
	close(e.queue)
	<-e.done
}
