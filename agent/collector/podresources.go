// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// podResourcesTimeout bounds one List call to the kubelet.
const podResourcesTimeout = 2 * time.Second

// podResourcesMaxMessage bounds the kubelet's List response (the kubelet's
// own clients use 16 MiB).
const podResourcesMaxMessage = 16 << 20

// PodResourcesCollector reads, from the kubelet pod-resources API, the CPUs
// the kubelet has allocated exclusively to containers (static CPU manager
// policy) and counts them per NUMA node, so TopologyFit knows each node's
// free capacity, and the GPUs and MIG devices allocated to containers (see
// allocateGPUs). It runs after the NUMA and GPU collectors and adds to
// their sections; it is an optional source: without the socket it reports
// Unavailable, and the allocations stay absent.
type PodResourcesCollector struct {
	root   hostfs.Root
	socket string // host path of the socket
	gpus   GPUResources
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
}

// NewPodResourcesCollector returns a collector for the kubelet socket at
// the host path socket, under root.
func NewPodResourcesCollector(root hostfs.Root, socket string) *PodResourcesCollector {
	return &PodResourcesCollector{root: root, socket: socket, gpus: DefaultGPUResources()}
}

// WithGPUResources sets which allocations are GPUs (see
// DefaultGPUResources). It returns c.
func (c *PodResourcesCollector) WithGPUResources(g GPUResources) *PodResourcesCollector {
	c.gpus = g
	return c
}

// Name implements Collector.
func (c *PodResourcesCollector) Name() telemetryv1alpha1.SourceName {
	return telemetryv1alpha1.SourcePodResources
}

// Collect implements Collector.
func (c *PodResourcesCollector) Collect(ctx context.Context, s *Sample) error {
	if c.socket == "" {
		return Unavailable("Disabled", "no pod-resources socket configured")
	}
	switch _, err := socketStat(c.root.Path(c.socket)); {
	case errors.Is(err, fs.ErrPermission):
		// The kubelet creates its pod-resources directory root's, mode
		// 0750: a non-root agent that mounts it cannot even look inside.
		c.close()
		return Unavailable("SocketPermissionDenied", "kubelet pod-resources socket %s: %v: the kubelet's pod-resources directory is root's (mode 0750); read it through the pod-resources relay (the podresources-relay container of the shipped DaemonSets), or run the agent as uid 0", c.root.Path(c.socket), err)
	case err != nil:
		c.close()
		return Unavailable("SocketNotMounted", "kubelet pod-resources socket %s not found; mount it, or the volume of the pod-resources relay (telesched-agent podresources-relay, whose log says why it is not listening), to report exclusive CPU and GPU allocations", c.root.Path(c.socket))
	}
	if err := socketAccess(c.root.Path(c.socket)); err != nil {
		c.close()
		return Unavailable("SocketPermissionDenied", "kubelet pod-resources socket %s: %v: connecting needs write permission on it, and the kubelet creates it as root's; read it through the pod-resources relay (the podresources-relay container of the shipped DaemonSets), or run the agent as uid 0", c.root.Path(c.socket), err)
	}
	if c.client == nil {
		conn, err := grpc.NewClient("unix://"+c.root.Path(c.socket),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(podResourcesMaxMessage)))
		if err != nil {
			return Failed("DialError", err, "connecting to %s", c.socket)
		}
		c.conn, c.client = conn, podresourcesv1.NewPodResourcesListerClient(conn)
	}
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	resp, err := c.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return Failed("ListError", err, "listing pod resources from the kubelet")
	}
	gpuErr := allocateGPUs(resp, s, c.gpus)
	if s.NUMA == nil {
		if len(s.GPUs) > 0 {
			return Degraded(gpuErr, "exclusive CPUs are counted per NUMA node, and the NUMA topology is not available%s", errSuffix(gpuErr))
		}
		return Unavailable("NoNUMATopology", "exclusive CPUs are counted per NUMA node, and the NUMA topology is not available")
	}
	nodeOf := make(map[int64]int, 256) // CPU id -> index in s.NUMA
	for i, n := range s.NUMA {
		ids, err := parseCPUList([]byte(n.CPUs))
		if err != nil {
			return Failed("ParseError", err, "NUMA node %d cpu list", n.ID)
		}
		for _, id := range ids {
			nodeOf[int64(id)] = i
		}
	}
	counts := make([]int32, len(s.NUMA))
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			for _, id := range ctr.GetCpuIds() {
				if i, ok := nodeOf[id]; ok {
					counts[i]++
				}
			}
		}
	}
	for i := range s.NUMA {
		s.NUMA[i].AllocatedExclusiveCPUs = ptr.To(counts[i])
	}
	if gpuErr != nil {
		return Degraded(gpuErr, "%v", gpuErr)
	}
	return nil
}

// errSuffix is "; " and err's text, or "" for no error.
func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; " + err.Error()
}

// socketStat stats the socket; a variable so that tests, which run as
// root, can see what a non-root agent sees.
var socketStat = os.Stat

// socketAccess reports whether this process may connect to the unix
// socket at path: connect(2) needs write permission on it.
var socketAccess = func(path string) error { return unix.Access(path, unix.W_OK) }

func (c *PodResourcesCollector) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.client = nil, nil
	}
}

// Close releases the connection to the kubelet.
func (c *PodResourcesCollector) Close() { c.close() }
