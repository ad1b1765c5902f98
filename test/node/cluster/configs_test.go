// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// TestKubeletConfigFollowsTheHost: the kubelet's config decodes strictly as
// a KubeletConfiguration (a misspelt field fails here rather than being
// ignored), and departs from the defaults only where the host needs it:
// cgroup v1 allowed only on a cgroup v1 host, swap tolerated only where it
// is on, oom_score_adj restricted only where root lacks CAP_SYS_RESOURCE.
func TestKubeletConfigFollowsTheHost(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		host                   Host
		wantFailCgroupV1       bool
		wantFailSwapOn         bool
		wantRestrictOOMScoreAd bool
	}{
		{"cgroup v2, no swap", Host{}, true, true, false},
		{"cgroup v1", Host{CgroupV1: true}, false, true, false},
		{"swap on", Host{Swap: true}, true, false, false},
		{"no CAP_SYS_RESOURCE", Host{NoSysResource: true}, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(t, tc.host)
			var kc kubeletv1beta1.KubeletConfiguration
			if err := yaml.UnmarshalStrict([]byte(c.kubeletConfig()), &kc); err != nil {
				t.Fatalf("the kubelet config does not decode strictly: %v\n%s", err, c.kubeletConfig())
			}
			got := struct{ FailCgroupV1, FailSwapOn, Anonymous bool }{*kc.FailCgroupV1, *kc.FailSwapOn, *kc.Authentication.Anonymous.Enabled}
			want := struct{ FailCgroupV1, FailSwapOn, Anonymous bool }{tc.wantFailCgroupV1, tc.wantFailSwapOn, false}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("kubelet config (-want +got):\n%s", diff)
			}
			if kc.CgroupDriver != "cgroupfs" || kc.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook {
				t.Errorf("cgroupDriver %q, authorization %q; want cgroupfs and Webhook", kc.CgroupDriver, kc.Authorization.Mode)
			}
			restrict := strings.Contains(c.containerdConfig(), "restrict_oom_score_adj = true")
			if restrict != tc.wantRestrictOOMScoreAd {
				t.Errorf("containerd restrict_oom_score_adj %t, want %t", restrict, tc.wantRestrictOOMScoreAd)
			}
		})
	}
}

// TestProxyConfigDecodes: kube-proxy's config decodes strictly, in
// iptables mode, leaving the host's conntrack table alone.
func TestProxyConfigDecodes(t *testing.T) {
	c := testCluster(t, Host{})
	var pc kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict([]byte(c.proxyConfig()), &pc); err != nil {
		t.Fatalf("the kube-proxy config does not decode strictly: %v\n%s", err, c.proxyConfig())
	}
	if pc.Mode != "iptables" || pc.Conntrack.MaxPerCore == nil || *pc.Conntrack.MaxPerCore != 0 || pc.HostnameOverride != "node-a" {
		t.Errorf("kube-proxy config: mode %q, conntrack.maxPerCore %v, hostnameOverride %q", pc.Mode, pc.Conntrack.MaxPerCore, pc.HostnameOverride)
	}
}

func testCluster(t *testing.T, h Host) *Cluster {
	t.Helper()
	h.NodeIP, h.Runc, h.CNIBinDir = "192.0.2.10", "/usr/sbin/runc", "/usr/lib/cni"
	dir := t.TempDir()
	return &Cluster{Host: h, NodeName: "node-a", Dir: dir, opts: Options{Dir: dir, SandboxImage: DefaultSandboxImage},
		pki: &pki{dir: dir + "/pki"}}
}

func TestFirstServiceIP(t *testing.T) {
	got, err := firstServiceIP(DefaultServiceCIDR)
	if err != nil || got != "10.96.0.1" {
		t.Errorf("firstServiceIP(%s) = %q, %v; want 10.96.0.1", DefaultServiceCIDR, got, err)
	}
}
