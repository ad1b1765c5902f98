// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// stopGrace is how long a component has to exit on SIGTERM before it is
// killed.
const stopGrace = 15 * time.Second

// drainTimeout bounds the wait for the kubelet to stop every pod.
const drainTimeout = 90 * time.Second

// Stop ends the cluster: it stops the controllers (so nothing recreates a
// pod), deletes every pod and waits for the kubelet to stop their
// containers and tear their networks down, then stops each component and
// removes what is left on the host (Cleanup). The returned error joins
// every step that failed.
func (c *Cluster) Stop() error {
	var errs []error
	c.stopProc("kube-controller-manager")
	if err := c.drain(); err != nil {
		errs = append(errs, err)
	}
	c.stopProcs()
	if err := Cleanup(c.Dir, c.opts.BinDir, c.opts.KeepDir, c.opts.Progress); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// drain deletes every pod and waits until containerd runs no task in the
// kubelet's namespace.
func (c *Cluster) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("draining: %w", err)
	}
	zero := int64(0)
	for _, ns := range nss.Items {
		if err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("draining namespace %s: %w", ns.Name, err)
		}
	}
	c.progress("draining: deleted every pod; waiting for the kubelet to stop their containers")
	for {
		out, err := exec.CommandContext(ctx, c.bin("ctr"), "--address="+c.containerdSocket(), "-n", "k8s.io", "tasks", "ls", "-q").Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("draining: containers still running after %s: %s", drainTimeout, strings.TrimSpace(string(out)))
		case <-time.After(time.Second):
		}
	}
}

// stopProcs stops every component in the reverse of their start order.
func (c *Cluster) stopProcs() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.stopProc(c.procs[i].name)
	}
}

func (c *Cluster) stopProc(name string) {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(stopGrace):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
		}
		p.log.Close()
		_ = os.Remove(c.path(name + ".pid"))
	}
}

// Cleanup removes what a cluster in dir left on the host, whether or not
// it stopped cleanly: it kills components still running (by their pid
// files), containers in its runc root and their shims, unmounts what is
// mounted under dir, removes the pods' network namespaces, the bridge,
// kube-proxy's and the CNI plugins' iptables rules and the pods' cgroups,
// then dir itself unless keep.
func Cleanup(dir, binDir string, keep bool, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	var errs []error
	pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			fmt.Fprintf(progress, "node: killing %s (pid %d)\n", strings.TrimSuffix(filepath.Base(f), ".pid"), pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = os.Remove(f)
	}
	runcRoot := filepath.Join(dir, "runc")
	if runc, err := exec.LookPath("runc"); err == nil {
		nss, _ := os.ReadDir(runcRoot)
		for _, ns := range nss {
			root := filepath.Join(runcRoot, ns.Name())
			out, _ := exec.Command(runc, "--root", root, "list", "-q").Output()
			for _, id := range strings.Fields(string(out)) {
				if err := exec.Command(runc, "--root", root, "delete", "--force", id).Run(); err != nil {
					errs = append(errs, fmt.Errorf("runc delete %s: %w", id, err))
				}
			}
		}
	}
	killShims(filepath.Join(dir, "containerd"))
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	// containerd names the pods' network namespaces cni-<uuid>.
	if nss, err := filepath.Glob("/var/run/netns/cni-*"); err == nil {
		for _, ns := range nss {
			_ = exec.Command("ip", "netns", "delete", filepath.Base(ns)).Run()
		}
	}
	_ = exec.Command("ip", "link", "delete", "tsnode0").Run()
	if _, err := os.Stat(filepath.Join(binDir, "kube-proxy")); err == nil {
		_ = exec.Command(filepath.Join(binDir, "kube-proxy"), "--cleanup").Run()
	}
	removeCNIChains()
	removeCgroups()
	if !keep {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims whose command line names a path
// under dir (their -address).
func killShims(dir string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "containerd-shim") && strings.Contains(cmd, dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount point under dir, deepest first
// (lazily, so a busy one still goes).
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removeCNIChains removes the nat chains the CNI bridge plugin made for
// masquerading (CNI-<hash>) and the POSTROUTING rules that jump to them,
// for pods whose teardown did not run.
func removeCNIChains() {
	out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
	if err != nil {
		return
	}
	var chains []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "CNI-"):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && f[1] == "POSTROUTING" && strings.Contains(line, "-j CNI-"):
			_ = exec.Command("iptables", append([]string{"-t", "nat", "-D"}, f[1:]...)...).Run()
		}
	}
	for _, ch := range chains {
		_ = exec.Command("iptables", "-t", "nat", "-F", ch).Run()
	}
	for _, ch := range chains {
		_ = exec.Command("iptables", "-t", "nat", "-X", ch).Run()
	}
}

// removeCgroups removes the kubelet's pod cgroups (kubepods) from each
// cgroup v1 hierarchy and the unified one, deepest first.
func removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods*")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}
