// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// The powercap relay serves the RAPL energy counters (energy_uj) that
// Linux lets only root read since CVE-2020-8694 (the PLATYPUS power side
// channel; Documentation/power/powercap/powercap.rst, and the kernel's
// commit "powercap: restrict energy meter to root access"), so that an
// agent that does not run as root can measure its node's CPU packages and
// DRAM. It runs as uid 0 with every capability dropped (the files are
// root's, mode 0400: their owner needs no capability to read them) and
// sees only the host's powercap devices, read-only. It answers each
// request with the counters asked for and nothing else, and reads a
// counter at most once each MinInterval, serving the last value in
// between: the side channel needs counters read thousands of times a
// second, the agent reads them once a sample.

// Defaults of PowercapOptions.
const (
	DefaultPowercapRoot        = "/sys/devices/virtual/powercap"
	DefaultPowercapMinInterval = 250 * time.Millisecond
	// powercapMaxZones bounds one request (a two-socket server has 4
	// zones, with intel-rapl-mmio 6).
	powercapMaxZones = 64
	// powercapTimeout bounds one request, end to end.
	powercapTimeout = 2 * time.Second
)

// PowercapOptions configure RunPowercap.
type PowercapOptions struct {
	// Listen is the path of the relay's socket.
	Listen string
	// Root is the host's powercap devices directory, mounted read-only
	// (DefaultPowercapRoot): zones are named relative to it
	// ("intel-rapl/intel-rapl:0").
	Root string
	// Mode is the socket's permission (DefaultMode).
	Mode fs.FileMode
	// MinInterval is how often at most a counter is read; requests in
	// between get its last value.
	MinInterval time.Duration
	// MaxConnections bounds the requests served at once.
	MaxConnections int
}

// Validate reports every option that cannot work.
func (o PowercapOptions) Validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen: a socket path is required"))
	}
	errs = append(errs, socketErrors(o.Mode, map[string]string{"--listen": o.Listen})...)
	if o.Root == "" || !filepath.IsAbs(o.Root) {
		errs = append(errs, fmt.Errorf("--powercap-root %q: an absolute path is required", o.Root))
	}
	if o.MinInterval < 10*time.Millisecond || o.MinInterval > 10*time.Second {
		errs = append(errs, fmt.Errorf("--min-interval %v: must be 10ms to 10s", o.MinInterval))
	}
	if o.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--max-connections %d: must be at least 1", o.MaxConnections))
	}
	return errors.Join(errs...)
}

// zoneRE is a zone's path under the root: one to three names of the
// characters powercap gives zones ("intel-rapl", "intel-rapl:0",
// "intel-rapl:0:1"), no "." or "..".
var zoneRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:-]*(/[A-Za-z][A-Za-z0-9_:-]*){0,2}$`)

type powercapServer struct {
	o     PowercapOptions
	slots chan struct{}

	mu    sync.Mutex
	cache map[string]reading
}

type reading struct {
	value string
	err   string
	at    time.Time
}

// RunPowercap serves until ctx ends, then removes its socket. It returns
// an error only if it cannot listen.
func RunPowercap(ctx context.Context, o PowercapOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	ln, err := listenSocket(o.Listen, o.Mode)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	logger.Info("Serving the host's RAPL energy counters", "listen", o.Listen, "root", o.Root, "mode", fmt.Sprintf("%#o", o.Mode), "minInterval", o.MinInterval)
	s := &powercapServer{o: o, slots: make(chan struct{}, o.MaxConnections), cache: map[string]reading{}}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logger.Error(err, "Accepting a connection")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			_ = conn.Close() // at its limit
			continue
		}
		wg.Go(func() {
			defer func() { <-s.slots }()
			defer conn.Close()
			if err := s.serve(conn); err != nil {
				logger.V(2).Info("Request refused", "reason", err.Error())
			}
		})
	}
}

// serve answers one request: zone paths, one a line, ended by an empty
// line; one line back per zone, its energy_uj, or "! " and why not.
func (s *powercapServer) serve(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(powercapTimeout))
	in := bufio.NewScanner(conn)
	in.Buffer(make([]byte, 256), 256)
	var zones []string
	for in.Scan() {
		line := in.Text()
		if line == "" {
			break
		}
		if len(zones) == powercapMaxZones {
			return fmt.Errorf("more than %d zones", powercapMaxZones)
		}
		zones = append(zones, line)
	}
	if err := in.Err(); err != nil {
		return err
	}
	var out strings.Builder
	for _, z := range zones {
		r := s.read(z)
		if r.err != "" {
			out.WriteString("! " + r.err + "\n")
		} else {
			out.WriteString(r.value + "\n")
		}
	}
	_, err := conn.Write([]byte(out.String()))
	return err
}

// read is zone's counter, read at most once each MinInterval.
func (s *powercapServer) read(zone string) reading {
	if !zoneRE.MatchString(zone) {
		return reading{err: fmt.Sprintf("zone %q: not a powercap zone name", zone)}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.cache[zone]; ok && now.Sub(r.at) < s.o.MinInterval {
		return r
	}
	r := reading{at: now}
	data, err := os.ReadFile(filepath.Join(s.o.Root, zone, "energy_uj"))
	v := strings.TrimSpace(string(data))
	switch {
	case err != nil:
		r.err = err.Error()
	case v == "":
		r.err = "empty energy_uj"
	default:
		if _, perr := strconv.ParseUint(v, 10, 64); perr != nil {
			r.err = fmt.Sprintf("energy_uj %q: not a counter", v)
		} else {
			r.value = v
		}
	}
	if len(s.cache) > 4*powercapMaxZones {
		clear(s.cache) // zones asked for come back; names never asked for go
	}
	s.cache[zone] = r
	return r
}

// ReadPowercap asks the relay at socket for the energy_uj of each zone
// (paths under its root) and returns them in order.
func ReadPowercap(socket string, zones []string) ([]uint64, error) {
	conn, err := net.DialTimeout("unix", socket, powercapTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(powercapTimeout))
	if _, err := conn.Write([]byte(strings.Join(zones, "\n") + "\n\n")); err != nil {
		return nil, err
	}
	in := bufio.NewScanner(conn)
	out := make([]uint64, 0, len(zones))
	for in.Scan() && len(out) < len(zones) {
		line := in.Text()
		if why, ok := strings.CutPrefix(line, "! "); ok {
			return nil, fmt.Errorf("the powercap relay: zone %s: %s", zones[len(out)], why)
		}
		v, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the powercap relay: zone %s: %q", zones[len(out)], line)
		}
		out = append(out, v)
	}
	if err := in.Err(); err != nil {
		return nil, err
	}
	if len(out) != len(zones) {
		return nil, fmt.Errorf("the powercap relay answered %d of %d zones", len(out), len(zones))
	}
	return out, nil
}
