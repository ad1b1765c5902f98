// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/sandbox/hosttree"
)

// shippedAgentArgs are the flags of deploy/agent/daemonset.yaml that bear
// on the agent's cost; every other flag is at its default (among them
// --sample-interval=1s, --interval=5s, and --nvml, which finds no library
// here and reports the GPU source unavailable, as on a node without GPUs).
var shippedAgentArgs = []string{"--heartbeat=5m", "--overheat-headroom-celsius=5", "--absolute-limit-celsius=90"}

// shippedMemoryLimit is the DaemonSet's GOMEMLIMIT, its container's
// memory limit.
const shippedMemoryLimit = "96MiB"

// continuous runs the agent at its shipped settings and node_exporter,
// scraped every scrape period, side by side over one window.
type continuous struct {
	window, scrape time.Duration
	scrapeAgent    bool
	// baseline, when set, is a second agent binary run beside the first
	// in the same window, at the same settings, for a before and after in
	// one run.
	baseline string
}

// benchAgent is one agent of the side-by-side window.
type benchAgent struct {
	name, bin, node string
	url             string
	cmd             *exec.Cmd
	f               footprint
}

// start runs the agent at its shipped settings on host, publishing to cp
// as its own node (its own state file) when cp is set.
func (a *benchAgent) start(host *hosttree.Host, cp *controlplane.ControlPlane) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	args := append([]string{"--host-root=" + host.Dir, "--metrics-bind-address=" + addr, "--health-probe-bind-address=",
		"--state-file=" + filepath.Join(host.Dir, "state", a.node+".json"), "-v=0"}, shippedAgentArgs...)
	if cp != nil {
		kubeconfig, err := benchNode(cp, host, a.node)
		if err != nil {
			return err
		}
		args = append(args, "--kubeconfig="+kubeconfig, "--node-name="+a.node)
	} else {
		args = append(args, "--publish=false")
	}
	if a.cmd, err = startEnv(a.bin, []string{"GOMEMLIMIT=" + shippedMemoryLimit}, args...); err != nil {
		return err
	}
	a.url = "http://" + addr + "/metrics"
	return nil
}

// footprint is one program's cost over the side-by-side window.
type footprint struct {
	cpu             time.Duration
	rss, hwm        int64
	anon, file      int64
	scrapes, cycles int
}

// measure starts both programs, lets them warm up, then measures their
// CPU time over the same window while scraping each every c.scrape. With
// a control plane (cp) the agent publishes to it as its DaemonSet does;
// without, it runs --publish=false.
func (c continuous) measure(agentBin, neBin string, host *hosttree.Host, cp *controlplane.ControlPlane) error {
	neAddr, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{
		"--path.procfs=" + filepath.Join(host.Dir, "proc"), "--path.sysfs=" + filepath.Join(host.Dir, "sys"), "--path.rootfs=" + host.Dir,
		"--collector.disable-defaults", "--web.listen-address=" + neAddr, "--log.level=error",
	}
	for _, col := range nodeExporterCollectors {
		args = append(args, "--collector."+col)
	}
	ne, err := start(neBin, args...)
	if err != nil {
		return err
	}
	defer stopProcess(ne)

	agents := []benchAgent{{name: "telesched-agent (shipped)", bin: agentBin, node: "bench-node-shipped"}}
	if c.baseline != "" {
		agents = append(agents, benchAgent{name: "baseline agent (shipped)", bin: c.baseline, node: "bench-node-baseline"})
	}
	publishing := "not publishing (-api=false)"
	if cp != nil {
		publishing = "publishing to the local control plane"
	}
	for i := range agents {
		a := &agents[i]
		if err := a.start(host, cp); err != nil {
			return err
		}
		defer stopProcess(a.cmd)
	}

	neURL := "http://" + neAddr + "/metrics"
	if _, err := waitScrape(neURL); err != nil {
		return err
	}
	for _, a := range agents {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if body, err := scrape(a.url); err == nil && counter(body, "telesched_agent_samples_total") >= 3 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: no samples within 20s", a.bin)
			}
		}
	}
	// Warm-up: the agent's first writes and the models' first fits, one
	// scrape of each.
	time.Sleep(5 * time.Second)
	var neF footprint
	samples0 := make([]float64, len(agents))
	for i, a := range agents {
		body, err := scrape(a.url)
		if err != nil {
			return err
		}
		samples0[i] = counter(body, "telesched_agent_samples_total")
	}
	pids := []int{ne.Process.Pid}
	for _, a := range agents {
		pids = append(pids, a.cmd.Process.Pid)
	}
	cpu0 := make([]time.Duration, len(pids))
	for i, pid := range pids {
		if cpu0[i], err = cpuTime(pid); err != nil {
			return err
		}
	}
	begin := time.Now()
	tick := time.NewTicker(c.scrape)
	for range int(c.window / c.scrape) {
		<-tick.C
		if _, err := scrape(neURL); err != nil {
			return err
		}
		neF.scrapes++
		if c.scrapeAgent {
			for i := range agents {
				if _, err := scrape(agents[i].url); err != nil {
					return err
				}
				agents[i].f.scrapes++
			}
		}
	}
	tick.Stop()
	time.Sleep(max(0, c.window-time.Since(begin)))
	elapsed := time.Since(begin)
	feet := []*footprint{&neF}
	for i := range agents {
		feet = append(feet, &agents[i].f)
	}
	for i, pid := range pids {
		cpu1, err := cpuTime(pid)
		if err != nil {
			return err
		}
		feet[i].cpu = cpu1 - cpu0[i]
	}
	for i := range agents {
		body, err := scrape(agents[i].url)
		if err != nil {
			return err
		}
		agents[i].f.cycles = int(counter(body, "telesched_agent_samples_total") - samples0[i])
	}
	for i, pid := range pids {
		if feet[i].rss, feet[i].hwm, err = memory(pid); err != nil {
			return err
		}
		if feet[i].anon, feet[i].file, err = rollup(pid); err != nil {
			return err
		}
	}

	agScrape := "not scraped"
	if c.scrapeAgent {
		agScrape = fmt.Sprintf("scraped every %v", c.scrape)
	}
	fmt.Printf("\nside by side over one %v window, shipped settings:\n", elapsed.Round(time.Second))
	fmt.Printf("  agent: DaemonSet flags %v (--sample-interval=1s, --interval=5s by default), GOMEMLIMIT=%s, %s, %s\n",
		shippedAgentArgs, shippedMemoryLimit, publishing, agScrape)
	fmt.Printf("  node_exporter: collectors %v, scraped every %v\n", nodeExporterCollectors, c.scrape)
	fmt.Printf("%-34s %26s %10s %10s %10s %10s %8s %8s\n", "", "continuous CPU", "RSS", "peak RSS", "anon", "file", "scrapes", "cycles")
	fmt.Printf("%-34s %26s %10s %10s %10s %10s %8d %8s\n", "node_exporter v1.12.1", cpuShare(neF.cpu, elapsed), mib(neF.rss), mib(neF.hwm), mib(neF.anon), mib(neF.file), neF.scrapes, "-")
	for _, a := range agents {
		fmt.Printf("%-34s %26s %10s %10s %10s %10s %8d %8d\n", a.name, cpuShare(a.f.cpu, elapsed), mib(a.f.rss), mib(a.f.hwm), mib(a.f.anon), mib(a.f.file), a.f.scrapes, a.f.cycles)
	}
	agF := agents[0].f
	fmt.Printf("agent/node_exporter continuous CPU ratio: %.2f (goal <= 1.00); RSS ratio: %.2f, peak %.2f (goal <= 1.00)\n",
		float64(agF.cpu)/float64(max(neF.cpu, 1)), float64(agF.rss)/float64(neF.rss), float64(agF.hwm)/float64(neF.hwm))
	if len(agents) > 1 {
		bF := agents[1].f
		fmt.Printf("agent/baseline (%s): continuous CPU ratio %.2f, RSS ratio %.2f (file-backed %.2f, anonymous %.2f)\n", c.baseline,
			float64(agF.cpu)/float64(max(bF.cpu, 1)), float64(agF.rss)/float64(bF.rss), float64(agF.file)/float64(bF.file), float64(agF.anon)/float64(bF.anon))
	}
	return nil
}
