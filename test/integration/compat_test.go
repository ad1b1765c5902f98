// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/telesched/telesched/sandbox/controlplane"
)

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
	for _, want := range []string{"the API server is Kubernetes 1.33 (v1.33.0), older than this scheduler (1.36)", "supported API servers are 1.36 and 1.37", "--skip-server-version-check"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out.String(), 20))
		}
	}
}
