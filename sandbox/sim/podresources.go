// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
	"github.com/telesched/telesched/scheduler/telemetry"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The names a simulated node's devices go by, as NVIDIA's device plugin
// and DRA driver name them: the GPU resource (whole GPUs, or MIG devices
// under the single strategy), the mixed strategy's resource prefix (one
// resource per MIG profile), and the DRA driver.
const (
	GPUResource       = "nvidia.com/gpu"
	MIGResourcePrefix = "nvidia.com/mig-"
	DRADriver         = "gpu.nvidia.com"
)

// DRADevice is GPU i's device name in its node's ResourceSlice.
func DRADevice(i int) string { return fmt.Sprintf("gpu-%d", i) }

// DRAMIGDevice is the device name of MIG device j of GPU i, of profile,
// in its node's ResourceSlice. NVIDIA's DRA driver names one
// gpu-<minor>-mig-<profile without dots>-<profile id>-<placement start>;
// the simulation has no profile ids or placements, and ends the name with
// the device's index instead.
func DRAMIGDevice(i, j int, profile string) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", i, strings.ReplaceAll(profile, ".", ""), j)
}

// draCDIDevice is the CDI device name the simulated DRA driver gives a
// claimed GPU: the driver's CDI vendor and class and the GPU's UUID, which
// the agent maps the claim's device to.
func draCDIDevice(uuid string) string { return "k8s." + DRADriver + "/device=" + uuid }

// maxSocketPath is the longest path a unix socket may have on Linux: 108
// bytes of sockaddr_un.sun_path, less the terminating NUL (unix(7)).
const maxSocketPath = 107

// ServePodResources serves the kubelet's pod-resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1: List, Get,
// GetAllocatableResources) on a unix socket at the host path socket under
// the node's tree, where the agent's --podresources-socket finds it: the
// node's pods and the devices each holds, named as the device plugin and
// DRA driver name them (GPU UUIDs, MIG device UUIDs as the node's NVML
// reports them). The returned stop ends it and removes the socket.
func (n *Node) ServePodResources(socket string) (stop func(), err error) {
	path := filepath.Join(n.Dir, socket)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("%s: pod-resources socket %s is %d bytes long, over the %d a unix socket path may have; use a shorter work directory (--dir)", n.Spec.Name, path, len(path), maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", n.Spec.Name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", n.Spec.Name, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: pod-resources socket: %w", n.Spec.Name, err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, podResources{n: n})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		srv.Stop()
		<-done
		_ = os.Remove(path)
	}, nil
}

// podResources is the kubelet's pod-resources service of a node.
type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	n *Node
}

// List implements the kubelet's List: every pod the node runs.
func (p podResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: p.n.podResources()}, nil
}

// Get implements the kubelet's Get: one pod by namespace and name.
func (p podResources) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	for _, pr := range p.n.podResources() {
		if pr.Namespace == req.GetPodNamespace() && pr.Name == req.GetPodName() {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: pr}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found on node %s", req.GetPodNamespace(), req.GetPodName(), p.n.Spec.Name)
}

// GetAllocatableResources implements the kubelet's: every device the
// device plugin advertises, and the node's CPUs.
func (p podResources) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	spec := p.n.Spec
	resp := &podresourcesv1.AllocatableResourcesResponse{}
	for c := range spec.Host.CPUs {
		resp.CpuIds = append(resp.CpuIds, int64(c))
	}
	if spec.DRA {
		return resp, nil
	}
	var whole []int
	var devs []Slice
	for i, g := range spec.GPUs {
		if g.MIG == nil {
			whole = append(whole, i)
		}
		for j := range g.MIG {
			devs = append(devs, Slice{GPU: i, Device: j})
		}
	}
	resp.Devices = spec.containerDevices(whole, devs)
	return resp, nil
}

// podResources is the node's pods as the kubelet lists them, by namespace
// and name: one container, "app", holding the pod's devices. The kubelet
// lists no CPU ids: the simulated nodes run no static CPU manager policy,
// so no pod holds CPUs exclusively.
func (n *Node) podResources() []*podresourcesv1.PodResources {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*podresourcesv1.PodResources, 0, len(n.pods))
	for uid, p := range n.pods {
		name := p.name
		if name.Name == "" {
			name.Name = string(uid)
		}
		var whole []int
		for _, g := range p.gpus {
			if !slices.Contains(p.claimed, g) {
				whole = append(whole, g)
			}
		}
		var devs []Slice
		for _, s := range p.slices {
			if !slices.Contains(p.claimedSlices, s) {
				devs = append(devs, s)
			}
		}
		ctr := &podresourcesv1.ContainerResources{Name: "app", Devices: n.Spec.containerDevices(whole, devs)}
		if len(p.claimed)+len(p.claimedSlices) > 0 {
			dr := &podresourcesv1.DynamicResource{ClaimName: p.claim, ClaimNamespace: name.Namespace}
			add := func(device, uuid string) {
				dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
					DriverName: DRADriver, PoolName: n.Spec.Name, DeviceName: device,
					CdiDevices: []*podresourcesv1.CDIDevice{{Name: draCDIDevice(uuid)}},
				})
			}
			for _, g := range p.claimed {
				add(DRADevice(g), n.Spec.GPUs[g].UUID)
			}
			for _, s := range p.claimedSlices {
				add(DRAMIGDevice(s.GPU, s.Device, n.Spec.GPUs[s.GPU].MIG[s.Device].Profile), nvmltest.MIGUUID(s.GPU, s.Device))
			}
			ctr.DynamicResources = []*podresourcesv1.DynamicResource{dr}
		}
		out = append(out, &podresourcesv1.PodResources{Name: name.Name, Namespace: name.Namespace, Containers: []*podresourcesv1.ContainerResources{ctr}})
	}
	slices.SortFunc(out, func(a, b *podresourcesv1.PodResources) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// containerDevices are whole GPUs and MIG devices as the device plugin
// names them: GPU UUIDs under GPUResource; MIG device UUIDs under
// GPUResource on the single strategy, under MIGResourcePrefix + profile on
// the mixed one (a "+" made a ".", as the device plugin names it). Each
// device's topology is its GPU's NUMA node.
func (spec NodeSpec) containerDevices(gpus []int, devs []Slice) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	add := func(resource, id string, gpu int) {
		out = append(out, &podresourcesv1.ContainerDevices{
			ResourceName: resource, DeviceIds: []string{id},
			Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: int64(spec.GPUs[gpu].NUMANode)}}},
		})
	}
	for _, g := range gpus {
		add(GPUResource, spec.GPUs[g].UUID, g)
	}
	for _, s := range devs {
		resource := GPUResource
		if spec.MIGStrategy != MIGSingle {
			resource = MIGResourcePrefix + telemetry.ProfileResource(spec.GPUs[s.GPU].MIG[s.Device].Profile)
		}
		add(resource, nvmltest.MIGUUID(s.GPU, s.Device), s.GPU)
	}
	return out
}
