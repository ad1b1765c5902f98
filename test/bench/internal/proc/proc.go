// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package proc reads what the benchmarks report of the control plane's
// processes from /proc.
package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPU is a process's user+system CPU seconds and resident MiB.
func CPU(pid int) (cpuSeconds, rssMiB float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	rss, err3 := strconv.ParseFloat(f[21], 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, err
	}
	const ticksPerSecond = 100 // USER_HZ
	return (utime + stime) / ticksPerSecond, rss * float64(os.Getpagesize()) / (1 << 20), nil
}

// ControlPlaneCPU is kube-apiserver's and etcd's CPU seconds so far (CPU
// of each).
func ControlPlaneCPU(apiserverPID, etcdPID int) (apiserver, etcd float64, err error) {
	if apiserver, _, err = CPU(apiserverPID); err != nil {
		return 0, 0, fmt.Errorf("kube-apiserver: %w", err)
	}
	if etcd, _, err = CPU(etcdPID); err != nil {
		return 0, 0, fmt.Errorf("etcd: %w", err)
	}
	return apiserver, etcd, nil
}

// Child finds the child process of this one named comm.
func Child(comm string) int {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if s[open+1:end] == comm && len(f) > 1 && f[1] == self {
			return pid
		}
	}
	return 0
}

// ControlPlane finds the kube-apiserver and etcd this process started
// (sandbox/controlplane runs them as its children).
func ControlPlane() (apiserverPID, etcdPID int, err error) {
	apiserverPID, etcdPID = Child("kube-apiserver"), Child("etcd")
	if apiserverPID == 0 || etcdPID == 0 {
		return 0, 0, fmt.Errorf("kube-apiserver (pid %d) or etcd (pid %d) not found among this process's children", apiserverPID, etcdPID)
	}
	return apiserverPID, etcdPID, nil
}
