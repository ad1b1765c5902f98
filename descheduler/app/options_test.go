// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"testing"
	"time"
)

func TestValidateNamesTheFlagAndValue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{name: "defaults are valid", mutate: func(*Options) {}, want: ""},
		{name: "interval", mutate: func(o *Options) { o.Interval = 0 }, want: "--interval must be > 0, got 0s"},
		{name: "per node", mutate: func(o *Options) { o.MaxEvictionsPerNode = 0 }, want: "--max-evictions-per-node-per-cycle must be >= 1, got 0"},
		{name: "per cycle", mutate: func(o *Options) { o.MaxEvictionsPerCycle = 0 }, want: "--max-evictions-per-cycle must be >= 1, got 0"},
		{name: "cooldown", mutate: func(o *Options) { o.Cooldown = -time.Second }, want: "--cooldown must be >= 0, got -1s"},
		{name: "sustain", mutate: func(o *Options) { o.ThermalSustain = -time.Second }, want: "--thermal-sustain must be >= 0, got -1s"},
		{name: "lease shorter than the renew deadline", mutate: func(o *Options) { o.LeaderElection.LeaseDuration = 10 * time.Second },
			want: "--leader-elect-lease-duration 10s must be longer than --leader-elect-renew-deadline 10s"},
		{name: "renew deadline within a retry", mutate: func(o *Options) { o.LeaderElection.RetryPeriod = 10 * time.Second },
			want: "--leader-elect-renew-deadline 10s must be longer than --leader-elect-retry-period 10s"},
		{name: "no lease name", mutate: func(o *Options) { o.LeaderElection.Name = "" },
			want: `--leader-elect-resource-namespace "kube-system" and --leader-elect-resource-name "" must not be empty`},
		{name: "durations are not checked with election off", mutate: func(o *Options) { o.LeaderElection = LeaderElection{} }, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			got := ""
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}
