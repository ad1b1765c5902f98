//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/metrics/legacyregistry"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	configscheme "github.com/telesched/telesched/apis/config/scheme"
	"github.com/telesched/telesched/scheduler/registry"
)

// Profiles are the profiles a run can compare.
const (
	profileDefault   = "default"
	profileTelesched = "telesched"
)

// ownTopic is the topic of this package's own workloads (./telesched):
// what upstream's files lack.
const ownTopic = "telesched"

var (
	upstreamDir = flag.String("schedperf-upstream", "",
		"directory of k8s.io/kubernetes' test/integration/scheduler_perf (its topics' performance-config.yaml and templates); empty: the module go.mod pins, from the module cache")
	topicsFlag = flag.String("schedperf-topics", "misc",
		"comma-separated topics to run: upstream's directories under -schedperf-upstream (misc, affinity, topology_spreading, default_preemption, ...) and "+ownTopic+" (this package's own workloads)")
	profilesFlag = flag.String("schedperf-profiles", profileDefault+","+profileTelesched,
		"comma-separated profiles, run in this order for each topic: "+profileDefault+" (kube-scheduler's) and "+profileTelesched+" (deploy/scheduler/scheduler-config.yaml's telesched profile)")
	writesPerNodeMinute = flag.Float64("schedperf-writes-per-node-minute", 0.5,
		"NodeTelemetry status writes per node per minute from the nodes' creation to the workload's end, each a changed sample, as the fleet's agents write; 0: none after the first")
	kubeletFlag = flag.Bool("schedperf-kubelet", false,
		"run a kubelet stand-in, for both profiles alike: each bound pod is set Running and Ready by one status update, and its node's agent writes a sample that shows it 2 s after its reservation's hold; without it no pod runs and LoadAware counts every placed pod at its requests until its reservation's max age (PreemptionBasic and PreemptionAsync need it to finish with the telesched profile)")
)

// ownDir is this package's directory, the test's working directory at start.
var ownDir string

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "schedperf: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	if err := configscheme.Register(); err != nil {
		return err
	}
	if err := perf.InitTests(); err != nil {
		return err
	}
	var err error
	if ownDir, err = os.Getwd(); err != nil {
		return err
	}
	if *writesPerNodeMinute < 0 {
		return fmt.Errorf("-schedperf-writes-per-node-minute must not be negative, got %v", *writesPerNodeMinute)
	}
	for _, p := range split(*profilesFlag) {
		if p != profileDefault && p != profileTelesched {
			return fmt.Errorf("-schedperf-profiles: unknown profile %q (want %s or %s)", p, profileDefault, profileTelesched)
		}
	}
	if *upstreamDir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
		if err != nil {
			return fmt.Errorf("finding k8s.io/kubernetes in the module cache (set -schedperf-upstream): %w", err)
		}
		*upstreamDir = filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf")
	}
	// The workloads run in their topic's directory (their template paths
	// are relative to it): the data items must go elsewhere, by an
	// absolute path.
	if f := flag.Lookup("data-items-dir"); f != nil && f.Value.String() != "" {
		abs, err := filepath.Abs(f.Value.String())
		if err != nil {
			return err
		}
		if err := f.Value.Set(abs); err != nil {
			return err
		}
	} else {
		return fmt.Errorf("-data-items-dir is required: the workloads run in upstream's read-only topic directories")
	}
	return nil
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// BenchmarkPerfScheduling runs each topic's workloads with each profile:
// BenchmarkPerfScheduling/<topic>/<profile>/<test case>/<workload>. Each
// topic and profile writes its data items to
// BenchmarkPerfScheduling_<topic>_<profile>_benchmark_<topic>_<profile>_<time>.json
// under -data-items-dir.
func BenchmarkPerfScheduling(b *testing.B) {
	// One registry for every workload: each workload's scheduler gets its
	// own cache, book and domains (package registry). The scheduler_perf
	// scheduler has no leader election, so no PowerBudget status writer.
	fleets := newFleets(*writesPerNodeMinute, *kubeletFlag)
	plugins := withCRDs(registry.New(func() (*registry.Shared, error) {
		s := registry.NewShared(nil)
		fleets.setShared(s)
		return s, nil
	}).Framework())
	opts := []perf.SchedulerPerfOption{perf.WithPreRunFn(fleets.preRun), perf.WithPrepareFn(fleets.prepare), perf.WithNodeUpdateFn(fleets.nodesCreated)}
	for _, topic := range split(*topicsFlag) {
		dir := filepath.Join(*upstreamDir, topic)
		if topic == ownTopic {
			dir = filepath.Join(ownDir, ownTopic)
		}
		b.Run(topic, func(b *testing.B) {
			file := filepath.Join(dir, "performance-config.yaml")
			if _, err := os.Stat(file); err != nil {
				b.Fatalf("topic %s: %v", topic, err)
			}
			for _, profile := range split(*profilesFlag) {
				b.Run(profile, func(b *testing.B) {
					// Upstream's template paths are relative to the
					// topic's directory.
					b.Chdir(dir)
					fleets.setShared(nil)
					config, reg := file, frameworkruntime.Registry(nil)
					if profile == profileTelesched {
						config, reg = teleschedCopy(b, file), plugins
					}
					start := time.Now()
					batches := watchBatches()
					perf.RunBenchmarkPerfScheduling(b, config, topic+"_"+profile, reg, opts...)
					fmt.Fprintf(os.Stderr, "schedperf: %s: %v; opportunistic batching (all its workloads): %s\n", b.Name(), time.Since(start).Round(time.Second), batches())
				})
			}
		})
	}
}

// batchStats are kube-scheduler's opportunistic batching counters, summed
// over profiles: scheduling attempts by whether they had a node hint and
// used it, and the batch flushes by reason.
type batchStats map[string]float64

// batchCounts reads the batching counters from kube-scheduler's registry,
// in this process with the scheduler of every workload.
func batchCounts() batchStats {
	out := batchStats{}
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, fam := range fams {
		var key string
		switch fam.GetName() {
		case "scheduler_batch_attempts_total":
			key = "attempts"
		case "scheduler_batch_cache_flushed_total":
			key = "flushed"
		default:
			continue
		}
		for _, m := range fam.GetMetric() {
			k := key
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" || l.GetName() == "reason" {
					k += "/" + l.GetValue()
				}
			}
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

// watchBatches reads the batching counters every half second until the
// returned function is called, which says what they counted: scheduler_perf
// resets kube-scheduler's registry after each workload, so the counters
// are summed over the readings before each reset.
func watchBatches() func() string {
	var (
		mu          sync.Mutex
		done        = make(chan struct{})
		total, last = batchStats{}, batchStats{}
	)
	read := func() {
		cur := batchCounts()
		mu.Lock()
		defer mu.Unlock()
		for k, v := range cur {
			if v < last[k] { // reset: what it had counted is in total
				last[k] = 0
			}
			total[k] += v - last[k]
		}
		for k := range last {
			if _, ok := cur[k]; !ok {
				delete(last, k) // reset to nothing
			}
		}
		for k, v := range cur {
			last[k] = v
		}
	}
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() string {
		close(done)
		read()
		mu.Lock()
		defer mu.Unlock()
		return total.String()
	}
}

// String lists the counts, sorted by name.
func (s batchStats) String() string {
	var parts []string
	for k, v := range s {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	if len(parts) == 0 {
		return "no counts"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
