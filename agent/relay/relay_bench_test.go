// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// busyKubelet lists 110 pods (the kubelet's default maxPods) of one
// container and one exclusive CPU each.
type busyKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
}

func (busyKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for i := range 110 {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{
			Name: fmt.Sprintf("pod-%d", i), Namespace: "default",
			Containers: []*podresourcesv1.ContainerResources{{Name: "c", CpuIds: []int64{int64(i)}}},
		})
	}
	return resp, nil
}

// BenchmarkRelay is one List of 110 pods, as the agent makes each
// interval: from the kubelet's socket directly, through the relay run in
// this process, and, with TELESCHED_AGENT_BIN naming a built
// telesched-agent, through the relay as its own process, whose memory
// after the Lists is reported (rss-anon-KiB, rss-file-KiB: the binary's
// pages, shared in the page cache with the agent's).
//
//	TELESCHED_AGENT_BIN=$PWD/bin/telesched-agent go test -run '^$' -bench BenchmarkRelay -benchmem ./agent/relay/
func BenchmarkRelay(b *testing.B) {
	dir := b.TempDir()
	upstream := filepath.Join(dir, "kubelet.sock")
	defer serveKubelet(b, upstream, busyKubelet{})()

	lists := func(b *testing.B, path string) {
		conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		c := podresourcesv1.NewPodResourcesListerClient(conn)
		ctx := context.Background()
		if _, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{}); err != nil { // connected before the clock
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { lists(b, upstream) })
	b.Run("relay", func(b *testing.B) {
		o := Options{Listen: filepath.Join(dir, "relay.sock"), Upstream: upstream, Mode: DefaultMode,
			MaxConnections: DefaultMaxConnections, CheckInterval: 100 * time.Millisecond, DialTimeout: time.Second}
		defer start(b, o)()
		waitSocket(b, o.Listen, true)
		lists(b, o.Listen)
	})
	bin := os.Getenv("TELESCHED_AGENT_BIN")
	if bin == "" {
		return
	}
	b.Run("process", func(b *testing.B) {
		listen := filepath.Join(dir, "process.sock")
		cmd := exec.Command(bin, "podresources-relay", "--listen="+listen, "--kubelet-socket="+upstream)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
		waitSocket(b, listen, true)
		lists(b, listen)
		b.StopTimer()
		anon, file, err := rss(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(anon), "rss-anon-KiB")
		b.ReportMetric(float64(file), "rss-file-KiB")
	})
}

// rss is a process's resident anonymous and file-backed memory, in KiB
// (proc(5): RssAnon, RssFile of /proc/<pid>/status).
func rss(pid int) (anon, file int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", sc.Text(), err)
		}
		if k == "RssAnon" {
			anon = n
		} else {
			file = n
		}
	}
	return anon, file, sc.Err()
}
