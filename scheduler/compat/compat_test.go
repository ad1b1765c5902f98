// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package compat

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// TestKubernetesMinorMatchesGoMod: KubernetesMinor is the k8s.io/kubernetes
// go.mod requires, so the supported range moves with an upgrade.
func TestKubernetesMinorMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/kubernetes")
	}
	v, err := utilversion.ParseSemantic(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if v.Major() != 1 || v.Minor() != KubernetesMinor {
		t.Fatalf("go.mod requires k8s.io/kubernetes %s, KubernetesMinor says 1.%d", m[1], KubernetesMinor)
	}
}

// server answers /version as an API server of that version would.
func server(t *testing.T, v version.Info) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		major, minor, git string
		wantErr           string
	}{
		{"1", "37", "v1.37.2", ""},
		{"1", "37+", "v1.37.2-eks-1", ""},
		{"1", "38", "v1.38.0", ""},
		{"1", "36", "v1.36.3", "the API server is Kubernetes 1.36 (v1.36.3), older than this scheduler (1.37)"},
		{"1", "33", "v1.33.0", "supported API servers are 1.37 and 1.38"},
		{"1", "39", "v1.39.0", "the API server is Kubernetes 1.39 (v1.39.0), more than one minor version newer"},
		{"1", "x", "v1.x", `minor version "x"`},
	} {
		t.Run(tc.git, func(t *testing.T) {
			err := Check(server(t, version.Info{Major: tc.major, Minor: tc.minor, GitVersion: tc.git}))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Check: %v, want an error containing %q", err, tc.wantErr)
			case err != nil && !strings.Contains(err.Error(), SkipFlag):
				t.Errorf("the error does not say how to start anyway: %v", err)
			}
		})
	}
}
