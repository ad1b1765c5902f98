// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Host is what Preflight found out about the machine.
type Host struct {
	// CgroupV1 is true on a host whose cgroup controllers are mounted as
	// cgroup v1 hierarchies (with or without a unified mount beside them).
	CgroupV1 bool
	// Swap is true when /proc/swaps lists an active swap area.
	Swap bool
	// Runc is the runc binary containerd runs containers with.
	Runc string
	// CNIBinDir holds the CNI plugins (bridge, host-local, loopback,
	// portmap).
	CNIBinDir string
	// NoSysResource is true when this process lacks CAP_SYS_RESOURCE,
	// without which no process may lower its oom_score_adj: runc then
	// fails to give a pod sandbox the kubelet's -998 ("nsexec: failed to
	// update /proc/self/oom_score_adj: Permission denied").
	NoSysResource bool
	// NodeIP is the IPv4 address of the interface the default route
	// leaves by: the API server advertises it as the kubernetes
	// Service's endpoint, which pods reach through kube-proxy's rules.
	NodeIP string
}

// Components are the binaries a cluster runs, looked up in BinDir.
var Components = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
	"containerd", "containerd-shim-runc-v2", "ctr", "kubectl",
}

// cniPlugins are the CNI plugins the cluster's network config chains.
var cniPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// cniBinDirs are where CNI plugins are looked for: the CNI project's
// default and Debian's containernetworking-plugins package.
var cniBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// v1Controllers are the cgroup v1 controllers the kubelet and runc need
// on a cgroup v1 host (the kubelet's cgroupfs driver creates the pod
// hierarchy in each).
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"}

// Preflight checks that this machine can run a one-node cluster and
// returns what it found; the error lists every unmet need, each with
// what to do about it.
func Preflight(binDir string) (Host, error) {
	var h Host
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not root: the kubelet and containerd mount filesystems and create cgroups and network namespaces (run as root)"))
	}
	for _, c := range Components {
		if _, err := os.Stat(filepath.Join(binDir, c)); err != nil {
			errs = append(errs, fmt.Errorf("%s missing in %s (make node-binaries builds it)", c, binDir))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		h.CgroupV1 = false
	} else if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		h.CgroupV1 = true
		for _, c := range v1Controllers {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c)); err != nil {
				errs = append(errs, fmt.Errorf("cgroup v1 controller %s is not mounted at /sys/fs/cgroup/%s (the kubelet needs %s)", c, c, strings.Join(v1Controllers, ", ")))
			}
		}
	} else {
		errs = append(errs, errors.New("no cgroup hierarchy at /sys/fs/cgroup (neither cgroup.controllers for v2 nor memory/ for v1)"))
	}
	h.NoSysResource = !effectiveCap(capSysResource)
	if b, err := os.ReadFile("/proc/swaps"); err == nil {
		h.Swap = len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1
	}
	if !filesystem("overlay") {
		errs = append(errs, errors.New("the kernel has no overlay filesystem (/proc/filesystems), which containerd's overlayfs snapshotter needs: modprobe overlay"))
	}
	var err error
	if h.Runc, err = exec.LookPath("runc"); err != nil {
		errs = append(errs, errors.New("runc not on PATH (Debian: apt-get install runc)"))
	}
	for _, dir := range cniBinDirs {
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			h.CNIBinDir = dir
			break
		}
	}
	if h.CNIBinDir == "" {
		errs = append(errs, fmt.Errorf("no CNI bridge plugin in %s (Debian: apt-get install containernetworking-plugins)", strings.Join(cniBinDirs, " or ")))
	} else {
		for _, p := range cniPlugins {
			if _, err := os.Stat(filepath.Join(h.CNIBinDir, p)); err != nil {
				errs = append(errs, fmt.Errorf("CNI plugin %s missing in %s", p, h.CNIBinDir))
			}
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		errs = append(errs, errors.New("iptables not on PATH, which kube-proxy and the CNI bridge plugin's masquerading need (Debian: apt-get install iptables)"))
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		errs = append(errs, errors.New("bridged traffic does not pass iptables (/proc/sys/net/bridge/bridge-nf-call-iptables missing): modprobe br_netfilter"))
	}
	if h.NodeIP, err = defaultRouteIPv4(); err != nil {
		errs = append(errs, err)
	}
	return h, errors.Join(errs...)
}

// capSysResource is CAP_SYS_RESOURCE's bit (linux/capability.h).
const capSysResource = 24

// effectiveCap says whether this process's effective capability set
// (CapEff in /proc/self/status) holds capability bit.
func effectiveCap(bit uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<bit) != 0
		}
	}
	return false
}

// filesystem says whether the kernel lists fs in /proc/filesystems.
func filesystem(fs string) bool {
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 0 && fields[len(fields)-1] == fs {
			return true
		}
	}
	return false
}

// defaultRouteIPv4 returns the first IPv4 address of the interface that
// /proc/net/route's default route (destination 0.0.0.0) leaves by.
func defaultRouteIPv4() (string, error) {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(f[0])
		if err != nil {
			return "", err
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return "", err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String(), nil
			}
		}
		return "", fmt.Errorf("the default route's interface %s has no IPv4 address", f[0])
	}
	return "", errors.New("no default route in /proc/net/route: the API server needs a non-loopback address to advertise")
}

// sysctls sets the kernel parameters pods' networking needs: forwarding
// between the CNI bridge and the host, and bridged traffic through
// iptables, where kube-proxy's Service rules are.
func sysctls() error {
	for _, p := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"} {
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("setting %s to 1: %w", p, err)
		}
	}
	return nil
}
