// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
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

	agAddr, err := freeAddr()
	if err != nil {
		return err
	}
	agArgs := append([]string{"--host-root=" + host.Dir, "--metrics-bind-address=" + agAddr, "--health-probe-bind-address=",
		"--state-file=" + filepath.Join(host.Dir, "state", "models.json"), "-v=0"}, shippedAgentArgs...)
	publishing := "not publishing (-api=false)"
	if cp != nil {
		const node = "bench-node-shipped"
		kubeconfig, err := benchNode(cp, host, node)
		if err != nil {
			return err
		}
		agArgs = append(agArgs, "--kubeconfig="+kubeconfig, "--node-name="+node)
		publishing = "publishing to the local control plane"
	} else {
		agArgs = append(agArgs, "--publish=false")
	}
	ag, err := startEnv(agentBin, []string{"GOMEMLIMIT=" + shippedMemoryLimit}, agArgs...)
	if err != nil {
		return err
	}
	defer stopProcess(ag)

	neURL, agURL := "http://"+neAddr+"/metrics", "http://"+agAddr+"/metrics"
	if _, err := waitScrape(neURL); err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if body, err := scrape(agURL); err == nil && counter(body, "telesched_agent_samples_total") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("agent: no samples within 20s")
		}
	}
	// Warm-up: the agent's first writes and the models' first fits, one
	// scrape of each.
	time.Sleep(5 * time.Second)
	var neF, agF footprint
	body, err := scrape(agURL)
	if err != nil {
		return err
	}
	s0 := counter(body, "telesched_agent_samples_total")
	neCPU0, err := cpuTime(ne.Process.Pid)
	if err != nil {
		return err
	}
	agCPU0, err := cpuTime(ag.Process.Pid)
	if err != nil {
		return err
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
			if _, err := scrape(agURL); err != nil {
				return err
			}
			agF.scrapes++
		}
	}
	tick.Stop()
	time.Sleep(max(0, c.window-time.Since(begin)))
	elapsed := time.Since(begin)
	neCPU1, err := cpuTime(ne.Process.Pid)
	if err != nil {
		return err
	}
	agCPU1, err := cpuTime(ag.Process.Pid)
	if err != nil {
		return err
	}
	if body, err = scrape(agURL); err != nil {
		return err
	}
	agF.cycles = int(counter(body, "telesched_agent_samples_total") - s0)
	neF.cpu, agF.cpu = neCPU1-neCPU0, agCPU1-agCPU0
	for _, p := range []struct {
		f   *footprint
		pid int
	}{{&neF, ne.Process.Pid}, {&agF, ag.Process.Pid}} {
		if p.f.rss, p.f.hwm, err = memory(p.pid); err != nil {
			return err
		}
		if p.f.anon, p.f.file, err = rollup(p.pid); err != nil {
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
	fmt.Printf("%-34s %26s %10s %10s %10s %10s %8d %8d\n", "telesched-agent (shipped)", cpuShare(agF.cpu, elapsed), mib(agF.rss), mib(agF.hwm), mib(agF.anon), mib(agF.file), agF.scrapes, agF.cycles)
	fmt.Printf("agent/node_exporter continuous CPU ratio: %.2f (goal <= 1.00); RSS ratio: %.2f, peak %.2f (goal <= 1.00)\n",
		float64(agF.cpu)/float64(max(neF.cpu, 1)), float64(agF.rss)/float64(neF.rss), float64(agF.hwm)/float64(neF.hwm))
	return nil
}
