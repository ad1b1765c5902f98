// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/compat"
)

// TestSchedulerOnThisServer runs bin/telesched-scheduler against the
// suite's own API server, whichever version it is: one the compatibility
// matrix supports keeps it running; an older one (make test-compat runs
// this suite against kube-apiserver 1.36) makes it stop at start, naming
// the server's real version.
func TestSchedulerOnThisServer(t *testing.T) {
	needControlPlane(t)
	info, err := newClients(t).kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(info.Minor, "+"))
	if err != nil {
		t.Fatalf("server minor %q: %v", info.Minor, err)
	}
	cmd, out := startScheduler(t, schedulerConfig(t, ""))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if minor >= compat.MinServerMinor && minor <= compat.MaxServerMinor {
		select {
		case err := <-done:
			t.Fatalf("the scheduler exited (%v) against API server 1.%d, which it supports:\n%s", err, minor, tail(out.String(), 20))
		case <-time.After(15 * time.Second):
		}
		if strings.Contains(out.String(), "the API server is Kubernetes") {
			t.Fatalf("the scheduler complained about API server 1.%d:\n%s", minor, tail(out.String(), 20))
		}
		t.Logf("the scheduler runs against API server 1.%d", minor)
		return
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the scheduler exited 0 against API server 1.%d", minor)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the scheduler was still running 60s after starting against API server 1.%d, outside 1.%d-1.%d:\n%s", minor, compat.MinServerMinor, compat.MaxServerMinor, tail(out.String(), 20))
	}
	want := fmt.Sprintf("the API server is Kubernetes 1.%d", minor)
	if !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, tail(out.String(), 20))
	}
	t.Logf("the scheduler stopped against API server 1.%d: %s", minor, tail(out.String(), 1))
}

// TestSchedulerRefusesUnsupportedServer runs bin/telesched-scheduler with
// the deployed configuration against an API server that says it is
// Kubernetes 1.33: the scheduler exits at start, naming the version and
// the supported ones, instead of waiting forever on its informers.
func TestSchedulerRefusesUnsupportedServer(t *testing.T) {
	needControlPlane(t)
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r) // an API this server does not serve
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info{Major: "1", Minor: "33", GitVersion: "v1.33.0"})
	}))
	t.Cleanup(old.Close)
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["old"] = &clientcmdapi.Cluster{Server: old.URL}
	kc.AuthInfos["anyone"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["old"] = &clientcmdapi.Context{Cluster: "old", AuthInfo: "anyone"}
	kc.CurrentContext = "old"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(config, []byte(schedulerConfig(t, "")+"clientConnection:\n  kubeconfig: "+kubeconfig+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	binDir, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "telesched-scheduler"), "--config="+config, "--secure-port=0")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the scheduler exited 0 against a 1.33 API server:\n%s", tail(out.String(), 20))
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the scheduler was still running 60s after starting against a 1.33 API server:\n%s", tail(out.String(), 20))
	}
	t.Logf("the scheduler stopped: %s", tail(out.String(), 1))
	for _, want := range []string{"the API server is Kubernetes 1.33 (v1.33.0), older than this scheduler (1.37)", "supported API servers are 1.37 and 1.38", "--skip-server-version-check"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out.String(), 20))
		}
	}
}
