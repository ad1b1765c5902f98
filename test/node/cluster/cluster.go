// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cluster runs a one-node Kubernetes cluster on this machine from
// real parts: etcd, kube-apiserver (Node and RBAC authorization, the
// NodeRestriction admission plugin, bound service account tokens),
// kube-controller-manager, containerd 2.x with runc and the CNI bridge
// plugin, the kubelet and kube-proxy, each a process of its own with its
// log in Dir/logs. Pods reach the API server through the kubernetes
// Service's ClusterIP as on any cluster, by kube-proxy's iptables rules.
//
// It needs root; Preflight says what else and what is missing.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Defaults of Options.
const (
	DefaultPodCIDR       = "10.244.0.0/24"
	DefaultServiceCIDR   = "10.96.0.0/16"
	DefaultAPIServerPort = 6443
	DefaultSandboxImage  = "registry.k8s.io/pause:3.10.2"
	DefaultStartTimeout  = 3 * time.Minute
)

// Fixed local ports of the components besides the API server's.
const (
	etcdClientPort = 23790
	etcdPeerPort   = 23800
	kubeletPort    = 10250
	kubeletHealthz = 10248
	proxyHealthz   = 10256
	proxyMetrics   = 10249
	kcmPort        = 10257
	schedulerPort  = 10259
)

// Options configure a cluster.
type Options struct {
	// Dir holds the cluster's state, certificates, configs and logs; it
	// is created, and removed by Stop unless KeepDir.
	Dir string
	// BinDir holds the Components.
	BinDir string
	// NodeName is the node's name; empty means the host name, in lower
	// case, as the kubelet would take it, or telesched-node where that
	// is no valid node name.
	NodeName string
	// SandboxImage is the pod sandbox (pause) image containerd runs
	// every pod's sandbox from; it must be imported, as there is no
	// registry to pull it from. Empty means DefaultSandboxImage.
	SandboxImage string
	// APIServerPort is the API server's secure port on all addresses;
	// 0 means DefaultAPIServerPort.
	APIServerPort int
	// StartTimeout bounds each component's start; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// KeepDir leaves Dir in place at Stop (its logs, for a failed run).
	KeepDir bool
	// Progress, if set, receives a line for each step.
	Progress io.Writer
}

// Cluster is a running one-node cluster.
type Cluster struct {
	Host Host
	// Kubeconfig is the path of a cluster administrator's kubeconfig
	// (system:masters); Config is the same as a rest.Config.
	Kubeconfig string
	Config     *rest.Config
	NodeName   string
	Dir        string

	opts  Options
	pki   *pki
	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Start checks the host, writes the certificates and configs, and starts
// every component in order, each once the one it depends on is ready, and
// returns once the node is Ready. On error it stops what it started.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Dir == "" || opts.BinDir == "" {
		return nil, errors.New("cluster: Dir and BinDir are required")
	}
	if opts.SandboxImage == "" {
		opts.SandboxImage = DefaultSandboxImage
	}
	if opts.APIServerPort == 0 {
		opts.APIServerPort = DefaultAPIServerPort
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	host, err := Preflight(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("this machine cannot run the node:\n%w", err)
	}
	if err := portsFree(opts.APIServerPort, etcdClientPort, etcdPeerPort, kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics, kcmPort, schedulerPort); err != nil {
		return nil, err
	}
	if opts.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, err
		}
		// The kubelet's own default; a host name that is no valid
		// node name (a DNS subdomain) gets a fixed one instead.
		opts.NodeName = strings.ToLower(h)
		if len(validation.IsDNS1123Subdomain(opts.NodeName)) > 0 {
			opts.NodeName = "telesched-node"
		}
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(opts.Dir); err == nil {
		return nil, fmt.Errorf("%s exists: a cluster may still run there (make node-down removes it)", opts.Dir)
	}
	for _, d := range []string{"logs", "etcd", "pki", "containerd", "kubelet", "cni/net.d", "runc"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	c = &Cluster{Host: host, NodeName: opts.NodeName, Dir: opts.Dir, opts: opts,
		Kubeconfig: filepath.Join(opts.Dir, "admin.kubeconfig")}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (logs in %s)", err, filepath.Join(opts.Dir, "logs"))
			c.stopProcs()
		}
	}()
	c.progress("host: node %s, address %s, cgroup v1 %t, swap %t, CAP_SYS_RESOURCE %t, runc %s, CNI plugins in %s",
		c.NodeName, host.NodeIP, host.CgroupV1, host.Swap, !host.NoSysResource, host.Runc, host.CNIBinDir)
	if err := sysctls(); err != nil {
		return c, err
	}
	if err := c.writePKI(); err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	steps := []struct {
		name  string
		start func(context.Context) error
	}{
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"kube-controller-manager", c.startControllerManager},
		{"kube-scheduler", c.startScheduler},
		{"containerd", c.startContainerd},
		{"kubelet", c.startKubelet},
		{"kube-proxy", c.startProxy},
	}
	for _, s := range steps {
		began := time.Now()
		sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
		err := s.start(sctx)
		cancel()
		if err != nil {
			return c, fmt.Errorf("starting %s: %w", s.name, err)
		}
		c.progress("%s ready in %s", s.name, time.Since(began).Round(100*time.Millisecond))
	}
	return c, nil
}

func (c *Cluster) progress(format string, args ...any) {
	fmt.Fprintf(c.opts.Progress, "node: "+format+"\n", args...)
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) server() string {
	return "https://" + net.JoinHostPort(c.Host.NodeIP, strconv.Itoa(c.opts.APIServerPort))
}

// writePKI makes the CA and every component's key pair and kubeconfig.
func (c *Cluster) writePKI() error {
	p, err := newPKI(c.path("pki"))
	if err != nil {
		return err
	}
	c.pki = p
	serviceIP, err := firstServiceIP(DefaultServiceCIDR)
	if err != nil {
		return err
	}
	if err := p.issue("apiserver", "kube-apiserver", nil, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost", "127.0.0.1", serviceIP, c.Host.NodeIP); err != nil {
		return err
	}
	for _, u := range []struct{ name, cn, org string }{
		{"admin", "telesched-node-admin", "system:masters"},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"kubelet", "system:node:" + c.NodeName, "system:nodes"},
		{"kube-proxy", "system:kube-proxy", ""},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		if err := p.issue(u.name, u.cn, orgs); err != nil {
			return err
		}
	}
	for _, k := range []string{"admin", "controller-manager", "scheduler", "kubelet", "kube-proxy"} {
		if err := p.kubeconfig(c.path(k+".kubeconfig"), c.server(), k); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	c.Config = cfg
	return nil
}

// firstServiceIP is the kubernetes Service's ClusterIP: the first
// address of the Service range.
func firstServiceIP(cidr string) (string, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := n.IP.To4()
	out := net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
	return out.String(), nil
}

// run starts a component with its output in logs/<name>.log.
func (c *Cluster) run(name string, env []string, args ...string) (*proc, error) {
	log, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.bin(name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	// Its own process group: a signal to the test is not its signal, and
	// Stop ends the group, with whatever the component started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	if err := os.WriteFile(c.path(name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// waitReady polls ready until it says true, the process exits (an error
// with its log's tail) or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, p *proc, what string, ready func(context.Context) bool) error {
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.name, p.err, c.logTail(p.name, 30))
		default:
		}
		return ready(ctx), nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("not %s within %s; the end of its log:\n%s", what, c.opts.StartTimeout, c.logTail(p.name, 30))
	}
	return err
}

// logTail is the last n lines of a component's log.
func (c *Cluster) logTail(name string, n int) string {
	b, _ := os.ReadFile(c.path("logs", name+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// httpOK says whether url answers 200; TLS is not verified, for the
// components' self-signed health endpoints.
func httpOK(ctx context.Context, url string) bool {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	p, err := c.run("etcd", nil, "--data-dir="+c.path("etcd"), "--name=telesched-node",
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=telesched-node="+peer, "--unsafe-no-fsync")
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "healthy", func(ctx context.Context) bool { return httpOK(ctx, client+"/health") })
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	pk := c.pki.path
	p, err := c.run("kube-apiserver", nil,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--bind-address=0.0.0.0", "--advertise-address="+c.Host.NodeIP,
		fmt.Sprintf("--secure-port=%d", c.opts.APIServerPort),
		"--tls-cert-file="+pk("apiserver.crt"), "--tls-private-key-file="+pk("apiserver.key"),
		"--client-ca-file="+pk("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pk("sa.pub"), "--service-account-signing-key-file="+pk("sa.key"),
		"--service-cluster-ip-range="+DefaultServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+pk("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pk("apiserver-kubelet-client.key"),
		"--profiling=false")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "ready", func(ctx context.Context) bool {
		b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok"
	})
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	pk := c.pki.path
	kc := c.path("controller-manager.kubeconfig")
	p, err := c.run("kube-controller-manager", nil,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", kcmPort),
		"--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+pk("sa.key"), "--root-ca-file="+pk("ca.crt"),
		"--cluster-signing-cert-file="+pk("ca.crt"), "--cluster-signing-key-file="+pk("ca.key"),
		"--cluster-cidr="+DefaultPodCIDR, "--service-cluster-ip-range="+DefaultServiceCIDR)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	// Ready once its controllers work: the default namespace's
	// ServiceAccount and the CA bundle that every pod's token volume
	// projects are there.
	return c.waitReady(ctx, p, "ready (default ServiceAccount and kube-root-ca.crt in namespace default)", func(ctx context.Context) bool {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil
	})
}

// startScheduler runs the cluster's default scheduler, kube-scheduler,
// which places pods that name no scheduler: the DaemonSet's and the
// Deployment's among them.
func (c *Cluster) startScheduler(ctx context.Context) error {
	kc := c.path("scheduler.kubeconfig")
	p, err := c.run("kube-scheduler", nil, "--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedulerPort), "--leader-elect=false")
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "healthy", func(ctx context.Context) bool {
		return httpOK(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedulerPort))
	})
}

func (c *Cluster) containerdSocket() string { return c.path("containerd", "containerd.sock") }

func (c *Cluster) startContainerd(ctx context.Context) error {
	cfg := c.path("containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(c.containerdConfig()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("cni", "net.d", "10-telesched-node.conflist"), []byte(cniConfig), 0o644); err != nil {
		return err
	}
	// containerd finds its runc shim on PATH.
	p, err := c.run("containerd", []string{"PATH=" + c.opts.BinDir + ":" + os.Getenv("PATH")}, "--config="+cfg)
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "serving", func(ctx context.Context) bool {
		return exec.CommandContext(ctx, c.bin("ctr"), "--address="+c.containerdSocket(), "version").Run() == nil
	})
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	cfg := c.path("kubelet", "config.yaml")
	if err := os.WriteFile(cfg, []byte(c.kubeletConfig()), 0o644); err != nil {
		return err
	}
	p, err := c.run("kubelet", nil, "--config="+cfg, "--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir="+c.KubeletRootDir(), "--hostname-override="+c.NodeName,
		"--node-ip="+c.Host.NodeIP, "--v=1")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "Ready", func(ctx context.Context) bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

func (c *Cluster) startProxy(ctx context.Context) error {
	cfg := c.path("kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(c.proxyConfig()), 0o644); err != nil {
		return err
	}
	p, err := c.run("kube-proxy", nil, "--config="+cfg)
	if err != nil {
		return err
	}
	return c.waitReady(ctx, p, "healthy", func(ctx context.Context) bool {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", proxyHealthz))
	})
}

// portsFree checks that nothing listens on the cluster's fixed ports.
func portsFree(ports ...int) error {
	var busy []string
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			busy = append(busy, strconv.Itoa(p))
			continue
		}
		l.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("ports %s are in use: another cluster may run (make node-down stops one this repository started)", strings.Join(busy, ", "))
	}
	return nil
}

// ImportImage imports an image tarball (docker-archive or OCI layout, as
// `ctr images import` takes) into the kubelet's containerd namespace,
// unpacked, so pods run it without a registry.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, c.bin("ctr"), "--address="+c.containerdSocket(), "-n", "k8s.io",
		"images", "import", "--local", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", tarball, err, out)
	}
	return nil
}

// Kubectl runs bin/kubectl as the cluster administrator and returns its
// standard output; the error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// KubeletRootDir is the kubelet's --root-dir: its pods' volumes and the
// pod-resources socket are under it.
func (c *Cluster) KubeletRootDir() string { return c.path("kubelet", "root") }
