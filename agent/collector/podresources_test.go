// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubeletPodResources serves the kubelet's pod-resources API with a fixed
// answer, over a real gRPC unix socket.
type kubeletPodResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (k *kubeletPodResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

func TestPodResourcesCollector(t *testing.T) {
	root := writeTree(t, nil)
	const socket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	c := NewPodResourcesCollector(root, socket)
	defer c.Close()
	twoNodes := func() *Sample {
		return &Sample{NUMA: []telemetryv1alpha1.NUMANodeStatus{
			{ID: 0, CPUs: "0-3"},
			{ID: 1, CPUs: "4-7"},
		}}
	}

	// No socket: unavailable, NUMA untouched.
	s := twoNodes()
	var se *SourceError
	if err := c.Collect(context.Background(), s); !errors.As(err, &se) || se.Reason != "SocketNotMounted" {
		t.Fatalf("Collect without a socket = %v, want SocketNotMounted", err)
	}
	if s.NUMA[0].AllocatedExclusiveCPUs != nil {
		t.Error("allocations reported without a socket")
	}

	// A kubelet with two pods holding exclusive CPUs.
	path := root.Path(socket)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &kubeletPodResources{resp: &podresourcesv1.ListPodResourcesResponse{
		PodResources: []*podresourcesv1.PodResources{
			{Name: "train", Namespace: "ml", Containers: []*podresourcesv1.ContainerResources{
				{Name: "main", CpuIds: []int64{0, 1, 2}},
				{Name: "sidecar"}, // shared pool: no exclusive CPUs
			}},
			{Name: "db", Namespace: "prod", Containers: []*podresourcesv1.ContainerResources{
				{Name: "pg", CpuIds: []int64{4, 5}},
			}},
		},
	}})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	s = twoNodes()
	if err := c.Collect(context.Background(), s); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	// node 0 (CPUs 0-3): 0, 1, 2 -> 3; node 1 (CPUs 4-7): 4, 5 -> 2
	got := []*int32{s.NUMA[0].AllocatedExclusiveCPUs, s.NUMA[1].AllocatedExclusiveCPUs}
	if diff := cmp.Diff([]*int32{ptr.To[int32](3), ptr.To[int32](2)}, got); diff != "" {
		t.Errorf("allocated exclusive CPUs per NUMA node (-want +got):\n%s", diff)
	}

	// A socket this process may not write to (the kubelet's is root's,
	// srwxr-xr-x, and the agent runs as 48811): named, not a dial error.
	// access(2) lets root through whatever the mode, so the check is
	// replaced here by what it answers a non-root agent.
	saved := socketAccess
	socketAccess = func(string) error { return unix.EACCES }
	s = twoNodes()
	err = c.Collect(context.Background(), s)
	socketAccess = saved
	if !errors.As(err, &se) || se.Reason != "SocketPermissionDenied" || !strings.Contains(err.Error(), "uid 0") {
		t.Errorf("Collect on a socket it may not write = %v, want SocketPermissionDenied saying to run as uid 0", err)
	}
	if s.NUMA[0].AllocatedExclusiveCPUs != nil {
		t.Error("allocations reported without access to the socket")
	}

	// The kubelet's directory is root's, mode 0750: a non-root agent's
	// stat of the socket fails with EACCES. That is a permission, not a
	// missing mount.
	savedStat := socketStat
	socketStat = func(root hostfs.Root, hostPath string) error {
		return &fs.PathError{Op: "stat", Path: root.Path(hostPath), Err: unix.EACCES}
	}
	s = twoNodes()
	err = c.Collect(context.Background(), s)
	socketStat = savedStat
	if !errors.As(err, &se) || se.Reason != "SocketPermissionDenied" || !strings.Contains(err.Error(), "mode 0750") {
		t.Errorf("Collect where the socket's directory may not be searched = %v, want SocketPermissionDenied naming the directory's mode", err)
	}

	// Without NUMA topology there is nothing to count against.
	if err := c.Collect(context.Background(), &Sample{}); !errors.As(err, &se) || se.Reason != "NoNUMATopology" {
		t.Errorf("Collect without NUMA = %v, want NoNUMATopology", err)
	}
}
