// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package podresources_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/telesched/telesched/agent/podresources"
)

// randomResponse is a kubelet's answer with every field of the API set,
// the ones the agent reads and the ones it skips (pod-level CPUs, memory,
// topology, share ids).
func randomResponse(rng *rand.Rand) *podresourcesv1.ListPodResourcesResponse {
	str := func(prefix string) string { return fmt.Sprintf("%s-%d", prefix, rng.IntN(1000)) }
	ids := func() []int64 {
		var out []int64
		for range rng.IntN(5) {
			out = append(out, rng.Int64N(1<<40)) // some ids take several varint bytes
		}
		return out
	}
	topo := func() *podresourcesv1.TopologyInfo {
		return &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: rng.Int64N(4)}}}
	}
	memory := func() []*podresourcesv1.ContainerMemory {
		return []*podresourcesv1.ContainerMemory{{MemoryType: "memory", Size: rng.Uint64(), Topology: topo()}}
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for range rng.IntN(6) {
		pod := &podresourcesv1.PodResources{Name: str("pod"), Namespace: str("ns"), CpuIds: ids(), Memory: memory()}
		for range rng.IntN(4) {
			ctr := &podresourcesv1.ContainerResources{Name: str("ctr"), CpuIds: ids(), Memory: memory()}
			for range rng.IntN(3) {
				ctr.Devices = append(ctr.Devices, &podresourcesv1.ContainerDevices{
					ResourceName: str("nvidia.com/mig"), DeviceIds: []string{str("MIG"), str("GPU")}, Topology: topo()})
			}
			for range rng.IntN(3) {
				dr := &podresourcesv1.DynamicResource{ClaimName: str("claim"), ClaimNamespace: str("ns")}
				for range rng.IntN(3) {
					share := str("share")
					dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
						CdiDevices: []*podresourcesv1.CDIDevice{{Name: str("k8s.gpu.nvidia.com/device")}, {Name: str("cdi")}},
						DriverName: str("gpu.nvidia.com"), PoolName: str("pool"), DeviceName: str("gpu"), ShareId: &share,
					})
				}
				ctr.DynamicResources = append(ctr.DynamicResources, dr)
			}
			pod.Containers = append(pod.Containers, ctr)
		}
		resp.PodResources = append(resp.PodResources, pod)
	}
	return resp
}

// want is what the client should give for a kubelet's answer: its fields
// as the generated types hold them.
func want(resp *podresourcesv1.ListPodResourcesResponse) *podresources.Response {
	out := &podresources.Response{}
	for _, p := range resp.GetPodResources() {
		pod := podresources.Pod{Name: p.GetName(), Namespace: p.GetNamespace()}
		for _, c := range p.GetContainers() {
			ctr := podresources.Container{Name: c.GetName(), CPUIDs: c.GetCpuIds()}
			for _, d := range c.GetDevices() {
				ctr.Devices = append(ctr.Devices, podresources.Devices{ResourceName: d.GetResourceName(), DeviceIDs: d.GetDeviceIds()})
			}
			for _, d := range c.GetDynamicResources() {
				dr := podresources.DynamicResource{ClaimName: d.GetClaimName(), ClaimNamespace: d.GetClaimNamespace()}
				for _, cr := range d.GetClaimResources() {
					r := podresources.ClaimResource{DriverName: cr.GetDriverName(), PoolName: cr.GetPoolName(), DeviceName: cr.GetDeviceName()}
					for _, cdi := range cr.GetCdiDevices() {
						r.CDIDevices = append(r.CDIDevices, cdi.GetName())
					}
					dr.ClaimResources = append(dr.ClaimResources, r)
				}
				ctr.DynamicResources = append(ctr.DynamicResources, dr)
			}
			pod.Containers = append(pod.Containers, ctr)
		}
		out.Pods = append(out.Pods, pod)
	}
	return out
}

// Decode reads what the kubelet's own generated types write, field for
// field, over random answers that set every field of the API.
func TestDecodeMatchesTheKubeletsTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		resp := randomResponse(rng)
		b, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := podresources.Decode(b)
		if err != nil {
			t.Fatalf("answer %d: Decode: %v", i, err)
		}
		if diff := cmp.Diff(want(resp), got); diff != "" {
			t.Fatalf("answer %d: Decode (-want +got):\n%s", i, diff)
		}
	}
	// Unpacked CPU ids, as a proto2 writer or an old one may send them:
	// ContainerResources{name: "c", cpu_ids: 3, cpu_ids: 300}, in a pod.
	ctr := []byte{0x0a, 0x01, 'c', 0x18, 0x03, 0x18, 0xac, 0x02}
	pod := append([]byte{0x1a, byte(len(ctr))}, ctr...)
	got, err := podresources.Decode(append([]byte{0x0a, byte(len(pod))}, pod...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&podresources.Response{Pods: []podresources.Pod{{Containers: []podresources.Container{{Name: "c", CPUIDs: []int64{3, 300}}}}}}, got); diff != "" {
		t.Errorf("unpacked cpu_ids (-want +got):\n%s", diff)
	}
	// Cut short anywhere inside a message: an error, not a partial answer.
	b, err := proto.Marshal(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
		Name: "train", Namespace: "ml", Containers: []*podresourcesv1.ContainerResources{{Name: "main", CpuIds: []int64{1, 2, 3}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n < len(b); n++ {
		if _, err := podresources.Decode(b[:n]); err == nil {
			t.Errorf("Decode of the first %d of %d bytes: no error", n, len(b))
		}
	}
}

// kubelet serves the pod-resources API over a real gRPC server on a unix
// socket, as the kubelet does.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	list func(context.Context) (*podresourcesv1.ListPodResourcesResponse, error)
}

func (k *kubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.list(ctx)
}

// countingListener counts the connections the server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func serve(t *testing.T, srv podresourcesv1.PodResourcesListerServer) (path string, ln *countingListener) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln = &countingListener{Listener: l}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, srv)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return path, ln
}

// List asks a real gRPC server as gRPC's own client does: the answers, on
// one connection kept between calls; the server's errors with their code
// and message; a deadline the server is told of; an answer over the limit
// refused.
func TestListAgainstAGRPCServer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var (
		next    *podresourcesv1.ListPodResourcesResponse
		failure error
		sawTime atomic.Bool
	)
	k := &kubelet{list: func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
		if d, ok := ctx.Deadline(); ok && time.Until(d) <= 2*time.Second {
			sawTime.Store(true)
		}
		return next, failure
	}}
	path, ln := serve(t, k)
	c := podresources.New(path, podresources.DefaultMaxMessage)
	defer c.Close()
	for i := range 20 {
		next = randomResponse(rng)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		got, err := c.List(ctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d: List: %v", i, err)
		}
		if diff := cmp.Diff(want(next), got); diff != "" {
			t.Fatalf("call %d: List (-want +got):\n%s", i, diff)
		}
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Errorf("20 calls took %d connections, want 1", n)
	}
	if !sawTime.Load() {
		t.Error("the server was not told the call's deadline (grpc-timeout)")
	}

	// An error, with a message that needs percent-encoding.
	failure = grpcstatus.Error(codes.Unavailable, "kubelet: 100% busy, café")
	_, err := c.List(context.Background())
	var se *podresources.StatusError
	if !errors.As(err, &se) || se.Code != int(codes.Unavailable) || se.Message != "kubelet: 100% busy, café" {
		t.Errorf("List of a failing server = %v, want code 14 (Unavailable) and the server's message", err)
	} else if !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("List error %q does not name the code", err)
	}
	failure = nil

	// A server without List (an older kubelet's would answer so for a
	// newer method).
	path2, _ := serve(t, &podresourcesv1.UnimplementedPodResourcesListerServer{})
	c2 := podresources.New(path2, podresources.DefaultMaxMessage)
	defer c2.Close()
	if _, err := c2.List(context.Background()); !errors.As(err, &se) || se.Code != int(codes.Unimplemented) {
		t.Errorf("List of a server without it = %v, want code 12 (Unimplemented)", err)
	}

	// An answer larger than the client allows.
	next = &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Name: strings.Repeat("p", 2000)}}}
	small := podresources.New(path, 1000)
	defer small.Close()
	if _, err := small.List(context.Background()); err == nil || !strings.Contains(err.Error(), "more than the 1000 allowed") {
		t.Errorf("List of an answer over the limit = %v, want it refused", err)
	}

	// A server slower than the caller's deadline.
	block := make(chan struct{})
	defer close(block)
	k.list = func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.List(ctx); err == nil {
		t.Error("List past its deadline: no error")
	}

	// No socket.
	none := podresources.New(filepath.Join(t.TempDir(), "none.sock"), podresources.DefaultMaxMessage)
	defer none.Close()
	if _, err := none.List(context.Background()); err == nil {
		t.Error("List without a socket: no error")
	}
}
