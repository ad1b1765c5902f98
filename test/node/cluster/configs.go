// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"fmt"
	"strings"
)

// containerdConfig is containerd 2.x's config (version 3): every path
// under Dir, runc as the only runtime with the cgroupfs driver (no
// systemd runs on the hosts this targets; the kubelet's cgroupDriver
// matches), the CNI plugins Preflight found and the pause image that Start
// was given, which must be imported since nothing is pulled. Where this
// process lacks CAP_SYS_RESOURCE (Host.NoSysResource), containerd raises
// every container's oom_score_adj to at least its own
// (restrict_oom_score_adj, as rootless containerd does): the kubelet's
// negative scores for pod sandboxes and Guaranteed pods cannot be set
// there, and runc would fail to start any pod.
func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  restrict_oom_score_adj = %[9]t

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%[5]q]
  conf_dir = %[6]q

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = %[7]q
  Root = %[8]q
  SystemdCgroup = false
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdSocket(), c.opts.SandboxImage,
		c.Host.CNIBinDir, c.path("cni", "net.d"), c.Host.Runc, c.path("runc"), c.Host.NoSysResource)
}

// cniConfig is the pod network: a Linux bridge with the node's pod range,
// the host as gateway, masquerading for traffic leaving the range, and
// portmap for hostPorts.
var cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "telesched-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "tsnode0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + DefaultPodCIDR + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// kubeletConfig is the kubelet's KubeletConfiguration. What departs from
// the defaults, and why:
//   - failCgroupV1: false on a cgroup v1 host. Since Kubernetes 1.35 the
//     kubelet refuses to start on cgroup v1 unless told to; cgroup v1 is
//     in maintenance upstream, and a cgroup v2 host needs no setting.
//   - failSwapOn: false only where swap is on (the kubelet would refuse
//     to start); memorySwap stays NoSwap, so pods get none.
//   - cgroupDriver: cgroupfs, containerd's runc runtime's (no systemd).
//   - authentication by client certificate (the API server's) and
//     webhook, authorization by webhook: a real node's, not anonymous.
//   - eviction thresholds low enough for a shared test disk.
func (c *Cluster) kubeletConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: %t
failSwapOn: %t
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
podCIDR: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
resolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
  nodefs.inodesFree: 2%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, c.containerdSocket(), !c.Host.CgroupV1, !c.Host.Swap, kubeletPort, kubeletHealthz, DefaultPodCIDR, c.pki.path("ca.crt"))
	return b.String()
}

// proxyConfig is kube-proxy's configuration: iptables mode (which the
// kernel's nf_tables serves through iptables-nft as well), leaving the
// conntrack table's size to the host.
func (c *Cluster) proxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack:
  maxPerCore: 0
`, c.path("kube-proxy.kubeconfig"), c.NodeName, DefaultPodCIDR, proxyHealthz, proxyMetrics)
}
