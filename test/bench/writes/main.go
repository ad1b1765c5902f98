// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Command writes measures what one NodeTelemetry status write costs the
// control plane, by how it is written: a server-side apply of the whole
// status (what the agent does), a server-side apply of the changed fields
// only, and a JSON merge patch of the changed fields. It starts the local
// control plane, gives every node a full status, then writes each node's
// changing fields (sample time, CPU, memory, temperature, watts) round
// after round, and reports kube-apiserver's and etcd's CPU seconds per
// write from /proc, and whether the object still holds the whole status
// afterwards (a method that loses fields is not one the agent can use).
//
//	go run ./test/bench/writes -nodes 200 -rounds 5 -writes 2000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/sandbox/controlplane"
	"github.com/telesched/telesched/scheduler/telemetry"
	"github.com/telesched/telesched/test/bench/internal/parallel"
	"github.com/telesched/telesched/test/bench/internal/proc"
	"github.com/telesched/telesched/test/fixtures"
)

const fieldManager = "telesched-agent"

func main() {
	nodes := flag.Int("nodes", 200, "NodeTelemetry objects written in turn")
	rounds := flag.Int("rounds", 5, "rounds of each method; every round is reported")
	writes := flag.Int("writes", 2000, "writes per method per round")
	profile := flag.String("profile", "", "if set, write a CPU profile of kube-apiserver during the first round of the agent's method to this file (go tool pprof -top FILE)")
	flag.Parse()
	if *nodes < 1 || *rounds < 1 || *writes < *nodes {
		fmt.Fprintln(os.Stderr, "writes: -nodes >= 1, -rounds >= 1, -writes >= -nodes")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, *nodes, *rounds, *writes, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "writes:", err)
		os.Exit(1)
	}
}

// method writes node i's changing fields at sample time t.
type method struct {
	name  string
	write func(ctx context.Context, dyn dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus) error
}

func statusObject(name string, status any) (*unstructured.Unstructured, error) {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry",
		"metadata": map[string]any{"name": name}, "status": st,
	}}, nil
}

// changed is the part of a status that moves from sample to sample.
func changed(st *telemetryv1alpha1.NodeTelemetryStatus) map[string]any {
	return map[string]any{
		"sampleTime": st.SampleTime.UTC().Format(time.RFC3339),
		"cpu":        map[string]any{"utilizationPercent": st.CPU.UtilizationPercent},
		"memory":     map[string]any{"utilizationPercent": st.Memory.UtilizationPercent, "availableBytes": st.Memory.AvailableBytes},
		"thermal":    map[string]any{"hottestMilliCelsius": st.Thermal.HottestMilliCelsius},
		"power":      map[string]any{"watts": st.Power.Watts},
	}
}

var methods = []method{
	{"server-side apply, whole status (the agent's)", func(ctx context.Context, r dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus) error {
		obj, err := statusObject(name, st)
		if err != nil {
			return err
		}
		_, err = r.ApplyStatus(ctx, name, obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		return err
	}},
	// With the agent's own field manager, an apply of some fields gives up
	// the rest it owned, and the API server removes them: the object loses
	// its required fields and the server refuses the write. So the agent
	// would apply its samples under a second manager, and its heartbeats
	// (the whole status) under its own.
	{"server-side apply, changed fields only, the agent's field manager", func(ctx context.Context, r dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus) error {
		return applyChanged(ctx, r, name, st, fieldManager)
	}},
	{"server-side apply, changed fields only, a second field manager", func(ctx context.Context, r dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus) error {
		return applyChanged(ctx, r, name, st, fieldManager+"-sample")
	}},
	{"JSON merge patch, changed fields only", func(ctx context.Context, r dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus) error {
		body, err := json.Marshal(map[string]any{"status": changed(st)})
		if err != nil {
			return err
		}
		_, err = r.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}, "status")
		return err
	}},
}

func applyChanged(ctx context.Context, r dynamic.ResourceInterface, name string, st *telemetryv1alpha1.NodeTelemetryStatus, manager string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry",
		"metadata": map[string]any{"name": name}, "status": changed(st),
	}}
	_, err := r.ApplyStatus(ctx, name, obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
	return err
}

func run(ctx context.Context, n, rounds, writes int, profile string) error {
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("writesbench-%d.log", os.Getpid()))
	logOut, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logOut.Close()
	klog.LogToStderr(false)
	klog.SetOutput(logOut)
	fmt.Printf("logs: %s\nstarting the local control plane\n", logPath)
	cp, err := controlplane.Start(controlplane.Options{Output: logOut})
	if err != nil {
		return err
	}
	defer cp.Stop()
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 5000, 5000
	kube := kubernetes.NewForConfigOrDie(&cfg)
	res := dynamic.NewForConfigOrDie(&cfg).Resource(telemetry.Resource)
	apiserverPID, etcdPID, err := proc.ControlPlane()
	if err != nil {
		return err
	}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("writes-%04d", i)
	}
	now := time.Now()
	full := func(_ int, t time.Time) *telemetryv1alpha1.NodeTelemetryStatus {
		st := fixtures.FullStatus(t, 2, 0) // a two-socket CPU node
		return &st
	}
	// Every node's object, with a full status written by the agent's own
	// way, so every method starts from what an agent leaves.
	if err := parallel.Run(n, 16, func(i int) error {
		if _, err := kube.CoreV1().Nodes().Create(ctx, fixtures.Node(names[i]), metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "NodeTelemetry",
			"metadata": map[string]any{"name": names[i]},
		}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		return methods[0].write(ctx, res, names[i], full(i, now))
	}); err != nil {
		return err
	}
	fmt.Printf("%d nodes with a full status; %d writes per method per round, %d rounds, methods interleaved by round\n\n", n, writes, rounds)

	type result struct{ apiserver, etcd []float64 }
	results := make([]result, len(methods))
	refused := make([]string, len(methods))
	t := now
	for round := range rounds {
		for mi, m := range methods {
			// Start every method from the whole status, as an agent's
			// heartbeat leaves it.
			if err := parallel.Run(n, 16, func(i int) error { return methods[0].write(ctx, res, names[i], full(i, t)) }); err != nil {
				return err
			}
			a0, e0, err := proc.ControlPlaneCPU(apiserverPID, etcdPID)
			if err != nil {
				return err
			}
			if refused[mi] != "" {
				continue
			}
			// A method the API server refuses is reported as such.
			if err := m.write(ctx, res, names[0], full(0, t.Add(time.Second))); apierrors.IsInvalid(err) {
				refused[mi] = "no: the API server refuses it (" + firstCause(err) + ")"
				fmt.Printf("round %d, %s: refused: %v\n", round+1, m.name, firstCause(err))
				continue
			} else if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			profiled := make(chan error, 1)
			if profile != "" && round == 0 && mi == 0 {
				// kube-apiserver's own /debug/pprof, while the writes run.
				go func() {
					data, err := kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "10").DoRaw(ctx)
					if err == nil {
						err = os.WriteFile(profile, data, 0o644)
					}
					profiled <- err
				}()
			} else {
				profiled <- nil
			}
			if err := parallel.Run(writes, 16, func(w int) error {
				st := full(w%n, t.Add(time.Duration(w/n+1)*time.Second))
				// Values that move from write to write, as samples do.
				st.CPU.UtilizationPercent = int32(w * 37 % 100)
				st.Power.Watts = int32(200 + w*53%300)
				st.Thermal.HottestMilliCelsius = int64(40_000 + w*7919%40_000)
				return m.write(ctx, res, names[w%n], st)
			}); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if err := <-profiled; err != nil {
				return fmt.Errorf("kube-apiserver's CPU profile: %w", err)
			}
			a1, e1, err := proc.ControlPlaneCPU(apiserverPID, etcdPID)
			if err != nil {
				return err
			}
			results[mi].apiserver = append(results[mi].apiserver, (a1-a0)/float64(writes)*1000)
			results[mi].etcd = append(results[mi].etcd, (e1-e0)/float64(writes)*1000)
			fmt.Printf("round %d, %s: kube-apiserver %.2f ms, etcd %.2f ms of CPU per write\n", round+1, m.name, (a1-a0)/float64(writes)*1000, (e1-e0)/float64(writes)*1000)
			t = t.Add(time.Duration(writes/n+2) * time.Second)
		}
	}

	// Does the object still hold the whole status after each method?
	fmt.Println()
	keeps := make([]string, len(methods))
	for mi, m := range methods {
		if refused[mi] != "" {
			keeps[mi] = refused[mi]
			continue
		}
		if err := methods[0].write(ctx, res, names[0], full(0, t)); err != nil {
			return err
		}
		st := full(0, t.Add(time.Second))
		if err := m.write(ctx, res, names[0], st); err != nil {
			return err
		}
		got, err := res.Get(ctx, names[0], metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, hasNUMA, _ := unstructured.NestedSlice(got.Object, "status", "numa")
		_, hasSources, _ := unstructured.NestedSlice(got.Object, "status", "sources")
		keeps[mi] = "yes"
		if !hasNUMA || !hasSources {
			keeps[mi] = "no: numa and sources gone"
		}
		t = t.Add(2 * time.Second)
	}
	median := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	fmt.Printf("| method | kube-apiserver ms CPU per write (each round) | median | etcd ms CPU per write, median | at 5000 nodes, one write each per 30 s heartbeat | whole status kept |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- |\n")
	for mi, m := range methods {
		if refused[mi] != "" {
			fmt.Printf("| %s | – | – | – | – | %s |\n", m.name, refused[mi])
			continue
		}
		var rs string
		for i, v := range results[mi].apiserver {
			if i > 0 {
				rs += ", "
			}
			rs += fmt.Sprintf("%.2f", v)
		}
		med := median(results[mi].apiserver)
		fmt.Printf("| %s | %s | %.2f | %.2f | %.2f cores | %s |\n", m.name, rs, med, median(results[mi].etcd), med/1000*5000/30, keeps[mi])
	}
	return nil
}

// firstCause is the first field error of an Invalid error, or its message.
func firstCause(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil && len(d.Causes) > 0 {
			return d.Causes[0].Field + ": " + d.Causes[0].Message
		}
	}
	return err.Error()
}
