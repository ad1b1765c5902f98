// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command compare reads the data-items files that scheduler_perf wrote for
// the default and the telesched profile (test/bench/schedperf), one
// directory per round, and prints each workload's throughput with both
// profiles, their ratio and the p99 of their scheduling attempts, then a
// line "WORKLOAD: ratio N.NN" per workload: the median of its rounds'
// ratios (telesched over default throughput).
//
//	go run ./test/bench/schedperf/compare DIR...
//
// A DIR holding no data-items file of its own is read as a parent of
// round directories.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// dataItems is scheduler_perf's data-items file (its DataItems).
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// measure is one workload's figures with one profile in one round.
type measure struct {
	throughput float64 // SchedulingThroughput's Average, pods/s
	p99        float64 // scheduled attempts' p99, ms
	hasP99     bool
}

// round is one round's measures: by workload, then profile.
type round map[string]map[string]measure

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: compare DIR...\n\n%s\n", doc)
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	rounds, err := load(flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, rounds); err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		os.Exit(1)
	}
}

const doc = "compare prints each workload's throughput with the default and the telesched profile, their ratio and their attempts' p99, from scheduler_perf's data-items files, one directory per round."

// load reads every round directory among dirs (a directory without
// data-items files stands for its subdirectories, in name order).
func load(dirs []string) ([]round, error) {
	var rounds []round
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_*.json"))
		if len(files) == 0 {
			subs, _ := filepath.Glob(filepath.Join(dir, "*", "BenchmarkPerfScheduling_*.json"))
			var subdirs []string
			for _, f := range subs {
				if d := filepath.Dir(f); !slices.Contains(subdirs, d) {
					subdirs = append(subdirs, d)
				}
			}
			if len(subdirs) == 0 {
				return nil, fmt.Errorf("%s: no BenchmarkPerfScheduling_*.json data-items files in it or its subdirectories", dir)
			}
			sort.Strings(subdirs)
			more, err := load(subdirs)
			if err != nil {
				return nil, err
			}
			rounds = append(rounds, more...)
			continue
		}
		r := round{}
		for _, f := range files {
			if err := r.read(f); err != nil {
				return nil, err
			}
		}
		rounds = append(rounds, r)
	}
	return rounds, nil
}

// read adds a data-items file's throughputs and attempt p99s to r. An
// item's Name label is BenchmarkPerfScheduling/<topic>/<profile>/<test
// case>/<workload>[/...]: the workload is the name without the profile.
func (r round) read(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var items dataItems
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, it := range items.DataItems {
		parts := strings.Split(it.Labels["Name"], "/")
		if len(parts) < 5 {
			continue
		}
		workload := strings.Join(slices.Concat(parts[1:2], parts[3:]), "/")
		profile := parts[2]
		if r[workload] == nil {
			r[workload] = map[string]measure{}
		}
		m := r[workload][profile]
		switch {
		case it.Labels["Metric"] == "SchedulingThroughput":
			m.throughput = it.Data["Average"]
		case it.Labels["Metric"] == "scheduler_scheduling_attempt_duration_seconds" && it.Labels["result"] == "scheduled":
			if it.Unit != "ms" {
				return fmt.Errorf("%s: %s in %q, want ms", file, it.Labels["Metric"], it.Unit)
			}
			m.p99, m.hasP99 = it.Data["Perc99"], true
		default:
			continue
		}
		r[workload][profile] = m
	}
	return nil
}

// report prints every round's figures, then each workload's median ratio.
func report(w io.Writer, rounds []round) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tROUND\tDEFAULT pods/s\tTELESCHED pods/s\tRATIO\tDEFAULT p99 ms\tTELESCHED p99 ms")
	ratios := map[string][]float64{}
	var workloads []string
	for i, r := range rounds {
		for _, name := range slices.Sorted(maps.Keys(r)) {
			d, t := r[name]["default"], r[name]["telesched"]
			ratio := "-"
			if d.throughput > 0 && t.throughput > 0 {
				q := t.throughput / d.throughput
				ratio = fmt.Sprintf("%.2f", q)
				if !slices.Contains(workloads, name) {
					workloads = append(workloads, name)
				}
				ratios[name] = append(ratios[name], q)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", name, i+1, num(d.throughput, d.throughput > 0), num(t.throughput, t.throughput > 0), ratio, num(d.p99, d.hasP99), num(t.p99, t.hasP99))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(workloads) == 0 {
		// Not an error: a smoke run of upstream's smallest workloads
		// schedules its pods in less than a second.
		fmt.Fprintln(w, "no workload has a throughput with both profiles: SchedulingThroughput needs a measured op that runs for a second or more")
		return nil
	}
	for _, name := range workloads {
		fmt.Fprintf(w, "%s: ratio %.2f\n", name, median(ratios[name]))
	}
	return nil
}

func num(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
