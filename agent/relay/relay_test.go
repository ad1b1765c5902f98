// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubelet serves the pod-resources API's List on a unix socket, one pod
// with two exclusive CPUs, as the kubelet's server does (gRPC over a
// socket it creates).
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
}

func (kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{
		Name: "train", Namespace: "ml",
		Containers: []*podresourcesv1.ContainerResources{{Name: "main", CpuIds: []int64{4, 5}}},
	}}}, nil
}

// serveKubelet serves the pod-resources API of server (kubelet{} when
// nil) on a unix socket at path.
func serveKubelet(tb testing.TB, path string, server podresourcesv1.PodResourcesListerServer) (stop func()) {
	tb.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	if server == nil {
		server = kubelet{}
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, server)
	go func() { _ = srv.Serve(ln) }()
	return srv.Stop // closes the listener, which removes the socket
}

func list(ctx context.Context, path string) (*podresourcesv1.ListPodResourcesResponse, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
}

// start runs the relay until stop, or the test's end: stop ends its
// context and fails the test unless Run returns nil within 10s.
func start(tb testing.TB, o Options) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				tb.Error("Run did not return 10s after its context ended")
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

func options(dir string) Options {
	return Options{
		Listen: filepath.Join(dir, "relay.sock"), Upstream: filepath.Join(dir, "kubelet.sock"),
		Mode: DefaultMode, MaxConnections: DefaultMaxConnections, CheckInterval: 100 * time.Millisecond, DialTimeout: time.Second,
	}
}

// waitSocket waits until a socket is (want) or is not at path.
func waitSocket(tb testing.TB, path string, want bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fi, err := os.Lstat(path)
		if got := err == nil && fi.Mode().Type() == fs.ModeSocket; got == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("socket at %s: want %t after 5s, stat err %v", path, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRelayListsThroughToTheKubelet(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	stopKubelet := serveKubelet(t, o.Upstream, nil)
	defer stopKubelet()
	start(t, o)
	waitSocket(t, o.Listen, true)

	resp, err := list(context.Background(), o.Listen)
	if err != nil {
		t.Fatalf("List through the relay: %v", err)
	}
	if p := resp.GetPodResources(); len(p) != 1 || p[0].GetName() != "train" || len(p[0].GetContainers()) != 1 ||
		len(p[0].GetContainers()[0].GetCpuIds()) != 2 {
		t.Errorf("List through the relay: %v, want the kubelet's pod train with CPUs [4 5]", resp)
	}

	// Mode 0660, group the relay's own: the agent shares that group.
	var st unix.Stat_t
	if err := unix.Stat(o.Listen, &st); err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode & 0o777; perm != 0o660 || int(st.Gid) != os.Getegid() {
		t.Errorf("relay socket mode %#o group %d, want 0660 and the relay's group %d", perm, st.Gid, os.Getegid())
	}
}

// TestRelayListensOnlyWhileTheKubeletDoes: no kubelet socket, no relay
// socket (the agent then says SocketNotMounted, not a List failure); the
// relay follows the kubelet's socket as it comes and goes, as on a kubelet
// restart, and lists again after.
func TestRelayListensOnlyWhileTheKubeletDoes(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	start(t, o)
	time.Sleep(5 * o.CheckInterval)
	waitSocket(t, o.Listen, false)

	stopKubelet := serveKubelet(t, o.Upstream, nil)
	waitSocket(t, o.Listen, true)
	if _, err := list(context.Background(), o.Listen); err != nil {
		t.Fatalf("List through the relay: %v", err)
	}
	stopKubelet()
	waitSocket(t, o.Listen, false)

	stopKubelet = serveKubelet(t, o.Upstream, nil)
	defer stopKubelet()
	waitSocket(t, o.Listen, true)
	if _, err := list(context.Background(), o.Listen); err != nil {
		t.Fatalf("List through the relay after the kubelet's socket came back: %v", err)
	}
}

// TestRelayLeavesWhatIsNotItsSocket: a regular file where the relay would
// listen is not removed, and Run says why it cannot listen.
func TestRelayLeavesWhatIsNotItsSocket(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	if err := os.WriteFile(o.Listen, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	stopKubelet := serveKubelet(t, o.Upstream, nil)
	defer stopKubelet()
	err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "listening") {
		t.Errorf("Run with a file at --listen: %v, want a listening error", err)
	}
	if b, _ := os.ReadFile(o.Listen); string(b) != "keep" {
		t.Errorf("the file at --listen holds %q after Run, want keep", b)
	}
}

// TestRelayHoldsAtMostMaxConnections: past MaxConnections a connection is
// closed at once; the held one still relays, and a slot freed is taken
// again.
func TestRelayHoldsAtMostMaxConnections(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	o.MaxConnections = 1
	stopKubelet := serveKubelet(t, o.Upstream, nil)
	defer stopKubelet()
	start(t, o)
	waitSocket(t, o.Listen, true)

	held, err := net.Dial("unix", o.Listen)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // accepted and relayed before the next
	extra, err := net.Dial("unix", o.Listen)
	if err != nil {
		t.Fatal(err)
	}
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a second connection with MaxConnections 1: read %d bytes, err %v; want EOF (closed)", n, err)
	}
	_ = extra.Close()
	_ = held.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err = list(context.Background(), o.Listen); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("List after the held connection closed: %v", err)
	}
}

// TestRelayStopsCleanly: when its context ends the relay removes its
// socket and ends the connections it relays.
func TestRelayStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	o := options(dir)
	stopKubelet := serveKubelet(t, o.Upstream, nil)
	defer stopKubelet()
	stop := start(t, o)
	waitSocket(t, o.Listen, true)
	c, err := net.Dial("unix", o.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	stop()
	if _, err := os.Lstat(o.Listen); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("relay socket after Run returned: stat err %v, want not exist", err)
	}
	// The kubelet's end may have sent its HTTP/2 settings already: read
	// them, then the end.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("a relayed connection after Run returned: %v, want it closed", err)
	}
}

func TestValidate(t *testing.T) {
	long := "/" + strings.Repeat("d", 107)
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string // "" for valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no listen", func(o *Options) { o.Listen = "" }, "--listen: a socket path is required"},
		{"same paths", func(o *Options) { o.Listen = o.Upstream }, "are both"},
		{"long path", func(o *Options) { o.Listen = long }, "over the 107"},
		{"mode without owner write", func(o *Options) { o.Mode = 0o466 }, "--socket-mode 0466"},
		{"mode with setuid", func(o *Options) { o.Mode = 0o4660 }, "--socket-mode 04660"},
		{"no connections", func(o *Options) { o.MaxConnections = 0 }, "--max-connections 0"},
		{"fast check", func(o *Options) { o.CheckInterval = time.Millisecond }, "--check-interval 1ms"},
		{"no dial timeout", func(o *Options) { o.DialTimeout = 0 }, "--dial-timeout 0s"},
	} {
		o := options("/run/x")
		tc.edit(&o)
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
