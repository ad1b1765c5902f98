// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package relay forwards connections from a unix socket of its own to the
// kubelet's pod-resources socket, so that an agent that does not run as
// root can read the pod-resources API.
//
// The kubelet creates its socket as root's (mode 0755, in a directory of
// mode 0750), and connect(2) needs write permission on a socket, so only
// uid 0 may connect. The relay is the only process that needs that uid:
// it runs in a container of its own, as uid 0 with every capability
// dropped and nothing mounted but the kubelet's pod-resources directory
// and a volume it shares with the agent. It listens there on a socket of
// mode 0660 owned by its own group, the agent's, and copies bytes both
// ways without reading them. The pod-resources API has read-only methods
// alone (List, Get, GetAllocatableResources), so the agent can do through
// the relay nothing the API does not allow anyone who can connect.
//
// The relay listens only while the kubelet's socket is there and
// connectable, so that an agent finds no socket where the kubelet has
// none, and says so (its podresources source reports SocketNotMounted)
// rather than failing to list through a relay with nothing behind it.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Defaults of Options.
const (
	DefaultMode           = 0o660
	DefaultMaxConnections = 4
	DefaultCheckInterval  = 5 * time.Second
	DefaultDialTimeout    = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Listen is the path of the relay's own socket.
	Listen string
	// Upstream is the path of the kubelet's pod-resources socket.
	Upstream string
	// Mode is the permission of the relay's socket (DefaultMode: owner
	// and group read and write). Its group is the process's group.
	Mode fs.FileMode
	// MaxConnections bounds the connections relayed at once; more are
	// closed when accepted. The agent holds one.
	MaxConnections int
	// CheckInterval is how often the upstream socket is looked for.
	CheckInterval time.Duration
	// DialTimeout bounds connecting to the upstream socket.
	DialTimeout time.Duration
}

// Validate reports every option that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen: a socket path is required"))
	}
	if o.Upstream == "" {
		errs = append(errs, errors.New("--kubelet-socket: a socket path is required"))
	}
	if o.Listen != "" && o.Listen == o.Upstream {
		errs = append(errs, fmt.Errorf("--listen and --kubelet-socket are both %s", o.Listen))
	}
	errs = append(errs, socketErrors(o.Mode, map[string]string{"--listen": o.Listen, "--kubelet-socket": o.Upstream})...)
	if o.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--max-connections %d: must be at least 1", o.MaxConnections))
	}
	if o.CheckInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--check-interval %v: must be at least 100ms", o.CheckInterval))
	}
	if o.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--dial-timeout %v: must be positive", o.DialTimeout))
	}
	return errors.Join(errs...)
}

// Run relays until ctx ends; then it stops listening, removes its socket
// and closes the connections it relays. It returns an error only if it
// cannot listen at all.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	r := &relay{o: o, slots: make(chan struct{}, o.MaxConnections), conns: map[net.Conn]struct{}{}}
	defer r.closeAll()
	logger := klog.FromContext(ctx)
	var lastWhy string
	tick := time.NewTicker(o.CheckInterval)
	defer tick.Stop()
	for {
		why := upstreamProblem(o.Upstream)
		switch {
		case why == "" && r.ln == nil:
			if err := r.listen(ctx); err != nil {
				return err
			}
			logger.Info("Relaying the kubelet's pod-resources socket", "listen", o.Listen, "upstream", o.Upstream, "mode", fmt.Sprintf("%#o", o.Mode))
		case why != "" && r.ln != nil:
			r.stopListening()
			logger.Info("Stopped listening: the kubelet's pod-resources socket is not usable", "upstream", o.Upstream, "reason", why)
		case why != "" && why != lastWhy:
			logger.Info("Not listening: the kubelet's pod-resources socket is not usable", "upstream", o.Upstream, "reason", why)
		}
		lastWhy = why
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// upstreamProblem says why the socket at path cannot be relayed, or "".
func upstreamProblem(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no socket at " + path + " (is the kubelet's pod-resources directory mounted, and the kubelet's --root-dir the one mounted?)"
	case err != nil:
		return err.Error()
	case fi.Mode().Type() != fs.ModeSocket:
		return path + " is not a socket"
	}
	// connect(2) needs write permission on the socket.
	if err := unix.Access(path, unix.W_OK); err != nil {
		return fmt.Sprintf("%s: %v: connecting needs write permission on it; the relay must run as its owner (uid %d)", path, err, owner(fi))
	}
	return ""
}

func owner(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*unix.Stat_t); ok {
		return int64(st.Uid)
	}
	return -1
}

type relay struct {
	o     Options
	slots chan struct{}

	ln   *net.UnixListener
	done chan struct{} // closed when ln's accept loop has returned

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func (r *relay) listen(ctx context.Context) error {
	ln, err := listenSocket(r.o.Listen, r.o.Mode)
	if err != nil {
		return err
	}
	r.ln, r.done = ln, make(chan struct{})
	go r.accept(ctx, ln, r.done)
	return nil
}

// listenSocket listens on a unix socket at path with mode: both relays'
// sockets. A socket left by a relay that did not stop cleanly is removed;
// anything else at the path is not ours to remove, and Listen reports it.
func listenSocket(path string, mode fs.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	if err := os.Chmod(path, mode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("setting the mode of %s: %w", path, err)
	}
	return ln, nil
}

// socketErrors says what is wrong with a relay's --socket-mode, and with
// its socket paths (flag name to path), which sockaddr_un bounds.
func socketErrors(mode fs.FileMode, paths map[string]string) []error {
	var errs []error
	// sockaddr_un.sun_path holds 108 bytes with the terminating NUL (unix(7)).
	for flag, p := range paths {
		if len(p) > 107 {
			errs = append(errs, fmt.Errorf("%s %s: %d bytes, over the 107 a unix socket path may have", flag, p, len(p)))
		}
	}
	if mode&^0o777 != 0 || mode&0o600 != 0o600 {
		errs = append(errs, fmt.Errorf("--socket-mode %#o: want permission bits only, with the owner's read and write", mode))
	}
	return errs
}

// stopListening closes the listener and removes its socket; connections
// already relayed carry on until either end closes them.
func (r *relay) stopListening() {
	_ = r.ln.Close() // removes the socket file too (net.UnixListener unlinks on Close)
	<-r.done
	r.ln, r.done = nil, nil
}

func (r *relay) accept(ctx context.Context, ln *net.UnixListener, done chan struct{}) {
	defer close(done)
	logger := klog.FromContext(ctx)
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				logger.Error(err, "Accepting a connection")
			}
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			logger.Info("Refused a connection: the relay holds its maximum", "maxConnections", r.o.MaxConnections)
			_ = c.Close()
			continue
		}
		r.track(c, true)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.slots }()
			defer r.track(c, false)
			if err := r.pipe(c); err != nil {
				logger.V(2).Info("Relayed connection ended", "err", err)
			}
		}()
	}
}

func (r *relay) track(c net.Conn, add bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		r.conns[c] = struct{}{}
	} else {
		delete(r.conns, c)
	}
}

// pipe copies between the client c and a new connection to the upstream
// socket until both directions have ended, passing each half-close on.
func (r *relay) pipe(c *net.UnixConn) error {
	defer c.Close()
	d := net.Dialer{Timeout: r.o.DialTimeout}
	uc, err := d.Dial("unix", r.o.Upstream)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", r.o.Upstream, err)
	}
	up := uc.(*net.UnixConn)
	defer up.Close()
	r.track(up, true)
	defer r.track(up, false)
	errs := make(chan error, 2)
	half := func(dst, src *net.UnixConn) {
		_, err := io.Copy(dst, src)
		_ = dst.CloseWrite()
		errs <- err
	}
	go half(up, c)
	go half(c, up)
	return errors.Join(<-errs, <-errs)
}

// closeAll stops listening and ends every relayed connection.
func (r *relay) closeAll() {
	if r.ln != nil {
		r.stopListening()
	}
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
