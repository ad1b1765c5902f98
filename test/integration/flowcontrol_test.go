// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
)

// TestAgentFlowSchema installs deploy/agent/flowcontrol.yaml and checks,
// by the API server's own answer (the X-Kubernetes-PF-* headers it sets on
// every response), that a request of the agent's ServiceAccount is
// classified into telesched's FlowSchema and priority level, not the
// built-in service-accounts one where every controller's requests go.
func TestAgentFlowSchema(t *testing.T) {
	needControlPlane(t)
	ctx := t.Context()
	admin := newClients(t)
	applyManifests(ctx, t, admin,
		filepath.Join(deployDir, "namespace.yaml"),
		filepath.Join(deployDir, "agent", "rbac.yaml"),
		filepath.Join(deployDir, "agent", "flowcontrol.yaml"),
	)
	fs, err := admin.kube.FlowcontrolV1().FlowSchemas().Get(ctx, "telesched-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := admin.kube.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "telesched-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := "apf-" + utilrand.String(5)
	schedNode(ctx, t, admin, node)
	token := agentToken(ctx, t, admin, createAgentPod(ctx, t, admin, "apf-agent-"+utilrand.String(5), node))
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	rt, err := rest.TransportFor(c)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	url := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/nodes/" + node
	var gotFS, gotPL string
	waitFor(t, "the agent's GET of its Node to be classified into the telesched-agent FlowSchema", 30*time.Second, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		gotFS, gotPL = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		return resp.StatusCode == http.StatusOK && gotFS == string(fs.UID)
	})
	if gotPL != string(pl.UID) {
		t.Errorf("priority level UID %s, want telesched-agent's %s", gotPL, pl.UID)
	}
	// An administrator's request is not the agents'.
	rt, err = rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got == string(fs.UID) {
		t.Error("an administrator's request was classified into the agents' FlowSchema")
	}
}
