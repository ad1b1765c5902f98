// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package powerbudget

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	configv1 "github.com/telesched/telesched/apis/config/v1"
	v1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/scheduler/estimate"
	"github.com/telesched/telesched/scheduler/plugins/internal/plugintest"
	"github.com/telesched/telesched/scheduler/powerbudget"
	"github.com/telesched/telesched/scheduler/telemetry"
)

// benchNodesPerRack is how many nodes each benchmark budget selects: a
// rack of 40 1U servers.
const benchNodesPerRack = 40

// benchPlugin is the plugin over n nodes of FreshNodes in racks of 40,
// each rack a PowerBudget far from full (every node passes the filter).
func benchPlugin(b testing.TB, n int, clock *plugintest.Clock) (*PowerBudget, []fwk.NodeInfo) {
	now := clock.Now()
	cache := plugintest.NewCache(clock)
	infos := plugintest.FreshNodes(cache, n, now)
	d := powerbudget.NewDomains(cache, estimate.NewBook(cache, estimate.DefaultOptions()), nil)
	var objs []runtime.Object
	for i, ni := range infos {
		rack := fmt.Sprintf("r%03d", i/benchNodesPerRack)
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ni.Node().Name, Labels: map[string]string{"rack": rack}}})
		if i%benchNodesPerRack == 0 {
			if err := d.SetBudget(&v1alpha1.PowerBudget{ObjectMeta: metav1.ObjectMeta{Name: rack}, Spec: spec("rack", rack, 1_000_000, nil, nil)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	args := *configv1.DefaultPowerBudgetArgs()
	args.TelemetryMaxAge = time.Hour // the benchmarks' clocks run on
	if err := d.Start(ctx, &rest.Config{Host: "http://api.test", Transport: apiServer{}}, factory, args, nil); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for deadline := time.Now().Add(30 * time.Second); d.Snapshot(now, args.TelemetryMaxAge).Node(infos[n-1].Node().Name) == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the domains did not see every Node's labels")
		}
	}
	return New(args, cache, d), infos
}

// BenchmarkFilterScore measures Filter+Score per node over 100, 1000 and
// 5000 nodes, every one in a rack of 40 with a PowerBudget, with the
// snapshot PreFilter took (telemetry standing still).
//
//	go test -run '^$' -bench BenchmarkFilterScore -benchmem ./scheduler/plugins/powerbudget/
func BenchmarkFilterScore(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			pl, infos := benchPlugin(b, n, plugintest.NewClock(time.Now()))
			pod := plugintest.CPUPod()
			cs := framework.NewCycleState()
			if _, st := pl.PreFilter(context.Background(), cs, pod, infos); !st.IsSuccess() {
				b.Fatalf("PreFilter: %v", st)
			}
			plugintest.BenchFilterScore(b, pl, cs, pod, infos, true)
		})
	}
}

// BenchmarkCycleTelemetryFlowing is the regime production lives in: one
// node's NodeTelemetry changes between every two scheduling cycles (5000
// nodes writing every 5 s are 1000 updates a second), and the scheduler's
// clock moves on 1 ms a cycle; PreFilter takes the domains' snapshot
// (rebuilt when the last is MaxSampleLag old, or always with lag=0, as
// before MaxSampleLag), Filter and Score run on every node, and the pod
// is placed (Reserve) on one of them. Reported
// per node, as BenchmarkFilterScore, for the two side by side.
//
//	go test -run '^$' -bench 'BenchmarkFilterScore|BenchmarkCycleTelemetryFlowing' -benchmem ./scheduler/plugins/powerbudget/
func BenchmarkCycleTelemetryFlowing(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		for _, lag := range []bool{true, false} {
			b.Run(fmt.Sprintf("nodes=%d/lag=%v", n, lag), func(b *testing.B) {
				clock := plugintest.NewClock(time.Now())
				pl, infos := benchPlugin(b, n, clock)
				views := make([]*telemetry.Node, n)
				for i, ni := range infos {
					views[i], _ = pl.cache.Get(ni.Node().Name)
				}
				pod := plugintest.CPUPod()
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					clock.Set(clock.Now().Add(time.Millisecond))
					// A new sample of one node: a copy of its view with
					// another sample time.
					v := *views[i%n]
					v.SampleTime = v.SampleTime.Add(time.Duration(i+1) * time.Millisecond)
					pl.cache.Set(&v)
					if !lag {
						pl.domains.SnapshotLatest(clock.Now(), pl.args.TelemetryMaxAge)
					}
					cs := framework.NewCycleState()
					if _, st := pl.PreFilter(ctx, cs, pod, infos); !st.IsSuccess() {
						b.Fatalf("PreFilter: %v", st)
					}
					for _, ni := range infos {
						if st := pl.Filter(ctx, cs, pod, ni); !st.IsSuccess() {
							b.Fatalf("Filter: %v", st)
						}
						_, _ = pl.Score(ctx, cs, pod, ni)
					}
					// The pod is placed: a reservation on its node.
					placed := *pod
					placed.UID = types.UID(fmt.Sprint(i))
					pl.Reserve(ctx, cs, &placed, infos[(i*7)%n].Node().Name)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
			})
		}
	}
}

// BenchmarkBudgetHintStatusWrite is the cost, per pending pod, of the hint
// for one PowerBudget status write (kube-scheduler runs it for every pod
// PowerBudget rejected, under its queue's lock): "generation kept" is a
// status write as the API server delivers it; "decoded" is the same pair
// without a generation, which the hint must decode and compare (as every
// status write was before it read the generation).
func BenchmarkBudgetHintStatusWrite(b *testing.B) {
	pl := New(*configv1.DefaultPowerBudgetArgs(), plugintest.NewCache(clock), newDomains(plugintest.NewCache(clock)))
	s := spec("rack", "a", 2000, ptr.To[int64](100), nil)
	obj := func(generation int64, measured int64) *unstructured.Unstructured {
		o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.PowerBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "rack-a", Generation: generation}, Spec: s,
			Status: v1alpha1.PowerBudgetStatus{MeasuredWatts: ptr.To(measured), Nodes: 40},
		})
		if err != nil {
			b.Fatal(err)
		}
		return &unstructured.Unstructured{Object: o}
	}
	p := pod("p", "1")
	for _, bc := range []struct {
		name       string
		generation int64
	}{{"generation kept", 3}, {"decoded", 0}} {
		old, cur := obj(bc.generation, 1850), obj(bc.generation, 1870)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if h, _ := pl.budgetHint(klog.Background(), p, old, cur); h != fwk.QueueSkip {
					b.Fatalf("hint %v, want QueueSkip", h)
				}
			}
		})
	}
}
