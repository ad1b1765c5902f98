// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	schedulerconfig "github.com/telesched/telesched/deploy/scheduler"
	"github.com/telesched/telesched/internal/proc"
	"github.com/telesched/telesched/scheduler/powerbudget"
)

// schedulerStartTimeout bounds the wait for the scheduler's /healthz.
const schedulerStartTimeout = time.Minute

// startScheduler runs the telesched-scheduler binary with the deployed
// configuration plus a default-scheduler profile (the baseline), without
// leader election, and waits for its /healthz.
func (s *sandbox) startScheduler(ctx context.Context, bin, kubeconfig string) error {
	conf := string(schedulerconfig.Config)
	conf = strings.Replace(conf, "  leaderElect: true", "  leaderElect: false", 1)
	conf = strings.Replace(conf, "profiles:\n", "profiles:\n- schedulerName: default-scheduler\n", 1)
	conf += "clientConnection:\n  kubeconfig: " + kubeconfig + "\n"
	path := filepath.Join(s.dir, "scheduler-config.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// --vmodule: kube-scheduler logs each plugin's weighted score of each
	// node (and each node's total) at level 10 in schedule_one.go; the
	// scheduler's log then says why a node won (docs/sandbox.md).
	cmd := exec.Command(bin, "--config="+path, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "-v=2", "--vmodule=schedule_one=10")
	cmd.Stdout, cmd.Stderr = s.logs.scheduler, s.logs.scheduler
	p, err := proc.Start(cmd, proc.DefaultGrace)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, p.Stop)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // its self-signed serving certificate
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(schedulerStartTimeout)
	for {
		select {
		case <-p.Exited():
			return fmt.Errorf("telesched-scheduler exited (%v); the end of %s:\n%s", p.Err(), s.logs.schedulerPath, tailFile(s.logs.schedulerPath, 15))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := client.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.printf("      healthy on 127.0.0.1:%d; profiles telesched, telesched-energy and default-scheduler (the workload: %s); log %s\n", port, s.opts.Profile, s.logs.schedulerPath)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("telesched-scheduler not healthy within %v; the end of %s:\n%s", schedulerStartTimeout, s.logs.schedulerPath, tailFile(s.logs.schedulerPath, 15))
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// printTable fetches the server-side table of a telesched resource
// (nodetelemetries, powerbudgets), the one `kubectl get` requests, and
// prints it with kubectl's table printer.
func (s *sandbox) printTable(ctx context.Context, resource, title string) error {
	raw, err := s.kube.Discovery().RESTClient().Get().
		AbsPath("/apis", telemetryv1alpha1.GroupName, "v1alpha1", resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("getting the %s table: %w", resource, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return fmt.Errorf("decoding the %s table: %w", resource, err)
	}
	var buf bytes.Buffer
	tw := printers.GetNewTabWriter(&buf)
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, tw); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resource == "powerbudgets" {
		s.res.BudgetTables = append(s.res.BudgetTables, buf.String())
	} else {
		s.res.Tables = append(s.res.Tables, buf.String())
	}
	s.printf("\n%s:\n%s\n", title, indent(buf.String(), "  "))
	return nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// newTable is a tab writer for the report's own tables.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// logFiles are the sandbox's log files: the control plane's output, the
// agents' and the scheduler's.
type logFiles struct {
	controlPlane, agents, scheduler *os.File
	schedulerPath                   string
}

func newLogs(dir string) (*logFiles, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &logFiles{schedulerPath: filepath.Join(dir, "scheduler.log")}
	var err error
	if l.controlPlane, err = os.Create(filepath.Join(dir, "control-plane.log")); err != nil {
		return nil, err
	}
	if l.agents, err = os.Create(filepath.Join(dir, "agents.log")); err != nil {
		return nil, err
	}
	if l.scheduler, err = os.Create(l.schedulerPath); err != nil {
		return nil, err
	}
	// The agents run in this process and log through klog: to the file
	// only, errors included, so the report stays readable.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			return nil, err
		}
	}
	klog.SetOutput(l.agents)
	return l, nil
}

func (l *logFiles) Close() {
	klog.Flush()
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(true)
	_ = l.controlPlane.Close()
	_ = l.agents.Close()
	_ = l.scheduler.Close()
}

// racksOf are a fleet's power budgets, with their nodes.
func racksOf(f *Fleet) []Rack {
	var out []Rack
	for _, b := range f.Budgets {
		r := Rack{Budget: b.Name, Rack: b.Rack, BudgetWatts: b.BudgetWatts, ReserveWatts: b.ReserveWatts}
		for _, n := range f.Nodes {
			if n.Rack == b.Rack {
				r.Nodes = append(r.Nodes, n.Name)
			}
		}
		out = append(out, r)
	}
	return out
}

// createBudgets creates a PowerBudget per rack budget of the fleet.
func (s *sandbox) createBudgets(ctx context.Context) error {
	if len(s.opts.Fleet.Budgets) == 0 {
		return nil
	}
	dyn, err := dynamic.NewForConfig(s.cp.Config)
	if err != nil {
		return err
	}
	for _, b := range s.opts.Fleet.Budgets {
		obj := powerBudgetObject(b.Name, map[string]any{"matchLabels": map[string]any{RackLabel: b.Rack}}, b.BudgetWatts)
		spec := obj.Object["spec"].(map[string]any)
		if b.ReserveWatts > 0 {
			spec["reserveWatts"] = b.ReserveWatts
		}
		if b.UnmeteredNodeWatts != nil {
			spec["unmeteredNodeWatts"] = *b.UnmeteredNodeWatts
		}
		if _, err := dyn.Resource(powerbudget.Resource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("PowerBudget %s: %w", b.Name, err)
		}
		s.printf("      PowerBudget %s: rack %s, %d W (reserve %d W)\n", b.Name, b.Rack, b.BudgetWatts, b.ReserveWatts)
	}
	return nil
}

// powerBudgetObject is a PowerBudget of the nodes selector selects (a
// LabelSelector), budgetWatts, nothing reserved.
func powerBudgetObject(name string, selector map[string]any, budgetWatts int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": telemetryv1alpha1.SchemeGroupVersion.String(), "kind": "PowerBudget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"nodeSelector": selector, "budgetWatts": budgetWatts},
	}}
}

// waitBudgetStatus waits for the scheduler's first status of every
// PowerBudget.
func (s *sandbox) waitBudgetStatus(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(s.cp.Config)
	if err != nil {
		return err
	}
	res := dyn.Resource(powerbudget.Resource)
	for {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		done := len(list.Items) == len(s.opts.Fleet.Budgets)
		for _, u := range list.Items {
			if _, ok, _ := unstructured.NestedInt64(u.Object, "status", "measuredWatts"); !ok {
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the scheduler's PowerBudget status: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
