//go:build schedperf

// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package schedperf

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	deployscheduler "github.com/telesched/telesched/deploy/scheduler"
)

// defaultSchedulerName is the scheduler upstream's pods name (none, so the
// default): the telesched profile takes its name.
const defaultSchedulerName = "default-scheduler"

// teleschedSchedulerConfig writes deploy/scheduler/scheduler-config.yaml
// with its telesched profile alone, renamed defaultSchedulerName, into dir
// and returns the file's path.
func teleschedSchedulerConfig(dir string) (string, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(deployscheduler.Config, &cfg); err != nil {
		return "", fmt.Errorf("deploy/scheduler/scheduler-config.yaml: %w", err)
	}
	profiles, _ := cfg["profiles"].([]any)
	var telesched map[string]any
	for _, p := range profiles {
		if p, ok := p.(map[string]any); ok && p["schedulerName"] == "telesched" {
			telesched = p
		}
	}
	if telesched == nil {
		return "", fmt.Errorf("deploy/scheduler/scheduler-config.yaml has no profile named telesched")
	}
	telesched["schedulerName"] = defaultSchedulerName
	cfg["profiles"] = []any{telesched}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "scheduler-config.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

// teleschedCopy writes a copy of the workload file with every test case's
// schedulerConfigPath set to the telesched profile's configuration, and
// returns its path. Workloads, ops and template paths are upstream's,
// unchanged; a test case that names a scheduler configuration of its own
// is left out, as it measures that configuration, not a profile.
func teleschedCopy(b *testing.B, file string) string {
	dir := b.TempDir()
	schedConfig, err := teleschedSchedulerConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		b.Fatalf("%s: %v", file, err)
	}
	var kept []map[string]any
	for _, tc := range cases {
		if path, ok := tc["schedulerConfigPath"]; ok {
			b.Logf("%s: test case %v has its own scheduler configuration (%v): not run with the telesched profile", file, tc["name"], path)
			continue
		}
		tc["schedulerConfigPath"] = schedConfig
		kept = append(kept, tc)
	}
	if data, err = yaml.Marshal(kept); err != nil {
		b.Fatal(err)
	}
	copyPath := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(copyPath, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return copyPath
}
