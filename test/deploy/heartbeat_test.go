// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/telesched/telesched/agent/publisher"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// flagValue is the value of --name in args, or def.
func flagValue(args []string, name, def string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return def
}

// TestAgentHeartbeatUnderReadyAgentMaxAge: in every install, the scheduler
// finds each agent DaemonSet's pods (--telemetry-agent-pod-selector) and
// judges their nodes fresh for longer than the agents' --heartbeat
// (--telemetry-max-age-ready-agent): otherwise every quiet node's telemetry
// would go stale between two heartbeats.
func TestAgentHeartbeatUnderReadyAgentMaxAge(t *testing.T) {
	type scheduler struct {
		what string
		args []string
	}
	static := decodeObject[corev1.Pod](t, readManifests(t, filepath.Join(singleDir, "kube-scheduler.yaml"))[0])
	for _, set := range manifestSets(t) {
		var agents []*appsv1.DaemonSet
		var schedulers []scheduler
		for _, o := range set.objs {
			switch {
			case o.GetKind() == "DaemonSet":
				agents = append(agents, decodeObject[appsv1.DaemonSet](t, o))
			case o.GetKind() == "Deployment" && o.GetName() == "telesched-scheduler":
				d := decodeObject[appsv1.Deployment](t, o)
				schedulers = append(schedulers, scheduler{"Deployment telesched-scheduler", d.Spec.Template.Spec.Containers[0].Args})
			}
		}
		if strings.Contains(set.name, "single-scheduler") && !strings.HasPrefix(set.name, "helm") {
			schedulers = append(schedulers, scheduler{"static pod kube-scheduler", static.Spec.Containers[0].Args})
		}
		if len(agents) == 0 || len(schedulers) == 0 {
			continue
		}
		for _, s := range schedulers {
			sel, err := labels.Parse(flagValue(s.args, "telemetry-agent-pod-selector", telemetry.DefaultAgentSelector))
			if err != nil {
				t.Fatalf("%s: %s: %v", set.name, s.what, err)
			}
			maxAge, err := time.ParseDuration(flagValue(s.args, "telemetry-max-age-ready-agent", telemetry.DefaultAgentMaxAge.String()))
			if err != nil {
				t.Fatalf("%s: %s: %v", set.name, s.what, err)
			}
			for _, ds := range agents {
				args := ds.Spec.Template.Spec.Containers[0].Args
				if !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
					t.Errorf("%s: %s does not find the pods of DaemonSet %s (selector %s, labels %v)", set.name, s.what, ds.Name, sel, ds.Spec.Template.Labels)
				}
				hb, err := time.ParseDuration(flagValue(args, "heartbeat", publisher.DefaultHeartbeat.String()))
				if err != nil {
					t.Fatalf("%s: DaemonSet %s: %v", set.name, ds.Name, err)
				}
				if hb >= maxAge {
					t.Errorf("%s: DaemonSet %s writes every --heartbeat=%v, not under %s's --telemetry-max-age-ready-agent=%v", set.name, ds.Name, hb, s.what, maxAge)
				}
			}
		}
	}
}
