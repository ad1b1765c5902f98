// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controlplane starts a local Kubernetes control plane — etcd and
// kube-apiserver built from source into bin/ — with the telesched CRDs
// installed. Integration tests and the sandbox both run on it.
package controlplane

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/telesched/telesched/deploy/crds"
)

// BinDirEnv names the environment variable that points at the directory
// holding the etcd and kube-apiserver binaries. The Makefile sets it.
const BinDirEnv = "TELESCHED_BIN_DIR"

// Binaries are the executables the control plane needs in its bin directory.
var Binaries = []string{"etcd", "kube-apiserver"}

// DefaultStartTimeout bounds how long etcd and kube-apiserver each get to
// become ready.
const DefaultStartTimeout = 60 * time.Second

var setLoggerOnce sync.Once

// Options configure Start.
type Options struct {
	// BinDir holds etcd and kube-apiserver. Empty means $TELESCHED_BIN_DIR,
	// else the bin/ directory of the enclosing telesched checkout.
	BinDir string
	// StartTimeout bounds the start of each component; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// Output, if set, receives the output of etcd and kube-apiserver.
	Output io.Writer
	// CRDs, if set, are installed instead of this build's (deploy/crds):
	// another release's, to test against them.
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config

	env     *envtest.Environment
	certDir string
}

// Start launches etcd and kube-apiserver, installs the telesched CRDs and
// waits until they are served. Call Stop to shut both down and remove their
// data.
func Start(opts Options) (*ControlPlane, error) {
	// envtest logs through controller-runtime's logger, which prints a
	// stack trace on first use unless someone set it: send it to klog.
	setLoggerOnce.Do(func() { ctrllog.SetLogger(klog.NewKlogr()) })
	binDir, err := ResolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	defs := opts.CRDs
	if defs == nil {
		if defs, err = crds.Load(); err != nil {
			return nil, fmt.Errorf("loading CRDs: %w", err)
		}
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	// Binary paths and the local mode are set explicitly: envtest would
	// otherwise let KUBEBUILDER_ASSETS or TEST_ASSET_* pick other binaries,
	// and USE_EXISTING_CLUSTER=true point the caller at a real cluster.
	env := &envtest.Environment{
		UseExistingCluster:       ptr.To(false),
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  timeout,
		CRDs:                     defs,
		ErrorIfCRDPathMissing:    true,
	}
	// A certificate directory of our own, unlike envtest's random one,
	// survives StopAPIServer, so a restarted API server keeps its serving
	// certificate and clients keep trusting it.
	certDir, err := os.MkdirTemp("", "telesched-apiserver-")
	if err != nil {
		return nil, err
	}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.CertDir = certDir
	apiServer.Path = filepath.Join(binDir, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binDir, "etcd")}
	if opts.Output != nil {
		apiServer.Out, apiServer.Err = opts.Output, opts.Output
		env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = opts.Output, opts.Output
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest may have started etcd before the API server failed.
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, errors.Join(fmt.Errorf("starting control plane from %s: %w", binDir, err), os.RemoveAll(certDir))
	}
	return &ControlPlane{Config: cfg, env: env, certDir: certDir}, nil
}

// Stop shuts down kube-apiserver and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	return errors.Join(c.env.Stop(), os.RemoveAll(c.certDir))
}

// StopAPIServer stops kube-apiserver alone; etcd and its data stay.
func (c *ControlPlane) StopAPIServer() error {
	return c.env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts a stopped kube-apiserver again, on the same address
// with the same certificates, and waits until it is healthy.
func (c *ControlPlane) StartAPIServer() error {
	return c.env.ControlPlane.APIServer.Start()
}

// EtcdURL is etcd's client URL; etcd serves /metrics there.
func (c *ControlPlane) EtcdURL() string {
	if c.env == nil || c.env.ControlPlane.Etcd == nil || c.env.ControlPlane.Etcd.URL == nil {
		return ""
	}
	return c.env.ControlPlane.Etcd.URL.String()
}

// WriteKubeconfig writes a kubeconfig for Config to path, for programs
// (the agent, the scheduler, kubectl) that take one.
func (c *ControlPlane) WriteKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["telesched"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData, Token: c.Config.BearerToken}
	cfg.Contexts["telesched"] = &clientcmdapi.Context{Cluster: "telesched", AuthInfo: "admin"}
	cfg.CurrentContext = "telesched"
	return clientcmd.WriteToFile(*cfg, path)
}

// ResolveBinDir returns the directory holding the control-plane binaries:
// dir if set, else $TELESCHED_BIN_DIR, else bin/ of the telesched checkout
// that contains the working directory. It fails, naming the make target to
// run, when a binary is missing.
func ResolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", fmt.Errorf("locating bin/ (set %s to override): %w", BinDirEnv, err)
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range Binaries {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("%s not found: run `make control-plane` to build it from source", path)
			}
			return "", err
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s is not an executable file", path)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
