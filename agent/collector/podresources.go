// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/ptr"

	"github.com/telesched/telesched/agent/hostfs"
	"github.com/telesched/telesched/agent/podresources"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
)

// podResourcesTimeout bounds one List call to the kubelet.
const podResourcesTimeout = 2 * time.Second

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
	client *podresources.Client
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
	switch err := socketStat(c.root, c.socket); {
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
		c.client = podresources.New(c.root.Path(c.socket), podresources.DefaultMaxMessage)
	}
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	resp, err := c.client.List(ctx)
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
	for _, pod := range resp.Pods {
		for _, ctr := range pod.Containers {
			for _, id := range ctr.CPUIDs {
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

// socketStat looks the socket up, as stat(2) would, with a raw system call
// (hostfs.Root.Lookup: the collector asks every sample); a variable so
// that tests, which run as root, can see what a non-root agent sees.
var socketStat = func(root hostfs.Root, hostPath string) error { return root.Lookup(hostPath) }

// socketAccess reports whether this process may connect to the unix
// socket at path: connect(2) needs write permission on it.
var socketAccess = func(path string) error { return unix.Access(path, unix.W_OK) }

func (c *PodResourcesCollector) close() {
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
}

// Close releases the connection to the kubelet.
func (c *PodResourcesCollector) Close() { c.close() }
