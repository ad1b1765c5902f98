// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package publisher writes the agent's NodeTelemetry status to the API
// server: by server-side apply on the status subresource, only when a signal
// moved past its deadband or the heartbeat is due, under a token-bucket rate
// limit, with exponential backoff and jitter on errors. It recreates the
// object, owned by its Node, when it is missing.
package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/telesched/telesched/agent/kube"
	telemetryv1alpha1 "github.com/telesched/telesched/apis/telemetry/v1alpha1"
	"github.com/telesched/telesched/internal/text"
)

// DefaultFieldManager is the field manager of the agent's writes.
const DefaultFieldManager = "telesched-agent"

// Defaults for Config.
const (
	DefaultHeartbeat      = 30 * time.Second
	DefaultRateLimitQPS   = 0.5
	DefaultRateLimitBurst = 3
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = 2 * time.Minute
	// DefaultHeartbeatJitter: each heartbeat comes after 80 to 100 % of
	// Heartbeat, at random.
	DefaultHeartbeatJitter = 0.2
	// backoffJitter spreads retries of many agents after an API outage.
	backoffJitter = 0.5
	// maxUndeclaredTries bounds the writes one Offer makes while the API
	// server refuses fields its CRD does not declare, each time leaving
	// out the ones it named: a CRD some releases old lacks a few.
	maxUndeclaredTries = 8
)

// Config configures a Publisher.
type Config struct {
	// NodeName names the Node and its NodeTelemetry.
	NodeName     string
	FieldManager string
	// Heartbeat is the longest time between writes while nothing moves.
	Heartbeat time.Duration
	// HeartbeatJitter (0 to 1) shortens each heartbeat by up to that share
	// of Heartbeat, at random, so that agents started together (a
	// rollout, a power-on) do not write together every Heartbeat ever
	// after; it never lengthens one, so Heartbeat stays the longest gap.
	HeartbeatJitter float64
	// RateLimitQPS and RateLimitBurst are the token bucket every write
	// takes a token from.
	RateLimitQPS   float32
	RateLimitBurst int
	// BackoffInitial and BackoffMax bound the wait after a failed write;
	// it doubles per failure, with jitter.
	BackoffInitial, BackoffMax time.Duration
	Deadbands                  Deadbands
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name must be set (--node-name, or NODE_NAME from the downward API)"))
	}
	if c.FieldManager == "" {
		errs = append(errs, errors.New("field manager must be set"))
	}
	if c.Heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat %v must be positive", c.Heartbeat))
	}
	if c.HeartbeatJitter < 0 || c.HeartbeatJitter >= 1 {
		errs = append(errs, fmt.Errorf("heartbeat jitter %v must be at least 0 and less than 1", c.HeartbeatJitter))
	}
	if c.RateLimitQPS <= 0 || c.RateLimitBurst < 1 {
		errs = append(errs, fmt.Errorf("rate limit %v/s burst %d must be positive", c.RateLimitQPS, c.RateLimitBurst))
	}
	if c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial {
		errs = append(errs, fmt.Errorf("backoff %v..%v must be positive and ordered", c.BackoffInitial, c.BackoffMax))
	}
	if err := c.Deadbands.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Outcome is what Offer did with a status.
type Outcome struct {
	// Published is true when the status was written.
	Published bool
	// Reason says why it was written ("first", "heartbeat", or the change)
	// or why not ("within deadbands", "rate limited", "backing off").
	Reason string
	// Duration is how long the write took; Err is its error.
	Duration time.Duration
	Err      error
	// Recreated is true when the object was missing and was created again.
	Recreated bool
	// Dropped are the sections left out of the write because the API
	// server refused them (see Publisher.rejected).
	Dropped []string
	// Undeclared are the status fields left out of the write because the
	// cluster's NodeTelemetry CRD does not declare them (see
	// Publisher.undeclared), as server-side apply names them
	// (".status.speed").
	Undeclared []string
}

// Publisher decides when to write and writes. It is not safe for
// concurrent use.
type Publisher struct {
	cfg     Config
	client  *kube.Client
	clock   clock.Clock
	limiter flowcontrol.RateLimiter

	ensured  bool // the object exists with its owner reference
	last     *telemetryv1alpha1.NodeTelemetryStatus
	lastTime time.Time
	// heartbeat is when, after lastTime, the next heartbeat is due: Heartbeat
	// less up to HeartbeatJitter of it, drawn anew after every write.
	heartbeat    time.Duration
	backoff      time.Duration
	backoffUntil time.Time
	// rejected are status sections the API server refused (422), by JSON
	// name, with its message. They are left out of every write, their
	// sources marked Failed/RejectedByAPIServer, until a heartbeat write
	// tries them again, so one bad value never stops the rest of the
	// node's telemetry.
	rejected map[string]string
	// undeclared are status fields the cluster's CRD does not declare:
	// the CRDs are older than this agent (they are upgraded apart from the
	// chart). Server-side apply refuses a whole write that carries one
	// ("field not declared in schema", a 500 from kube-apiserver v1.37;
	// see undeclaredFields), so they are left out of
	// every write until a heartbeat write tries them again, and the rest
	// of the status arrives as the older schema knows it.
	undeclared map[string]bool
}

// New returns a Publisher; cfg must be valid.
func New(cfg Config, client *kube.Client, clk clock.Clock) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{
		cfg:     cfg,
		client:  client,
		clock:   clk,
		limiter: flowcontrol.NewTokenBucketRateLimiterWithClock(cfg.RateLimitQPS, cfg.RateLimitBurst, clk),
	}, nil
}

// Offer takes the status of a new sample and writes it if it is due.
func (p *Publisher) Offer(ctx context.Context, st *telemetryv1alpha1.NodeTelemetryStatus) Outcome {
	now := p.clock.Now()
	if now.Before(p.backoffUntil) {
		return Outcome{Reason: "backing off"}
	}
	reason := "heartbeat"
	switch {
	case p.last == nil:
		reason = "first"
	case now.Sub(p.lastTime) >= p.heartbeat:
	default:
		if reason = Change(p.last, st, p.cfg.Deadbands); reason == "" {
			return Outcome{Reason: "within deadbands"}
		}
	}
	if !p.limiter.TryAccept() {
		return Outcome{Reason: "rate limited"}
	}
	if reason == "heartbeat" {
		p.rejected, p.undeclared = nil, nil // try every section and field again
	}
	start := p.clock.Now()
	recreated, err := p.write(ctx, p.trim(st))
	// rewrite writes st again, less what the server refused so far.
	rewrite := func() {
		again, werr := p.write(ctx, p.trim(st))
		recreated, err = recreated || again, werr
	}
	// Leave out what the CRD does not declare and write the rest at once.
	// kube-apiserver may name one such field a refusal, so this goes on
	// while each refusal names a field not left out yet.
	for try := 0; try < maxUndeclaredTries; try++ {
		fields := undeclaredFields(err)
		if len(fields) == 0 || p.knowsUndeclared(fields) {
			break
		}
		if p.undeclared == nil {
			p.undeclared = map[string]bool{}
		}
		for _, f := range fields {
			p.undeclared[f] = true
		}
		rewrite()
	}
	if sections := rejectedSections(err); len(sections) > 0 {
		// Leave out what the server refused and write the rest at once.
		if p.rejected == nil {
			p.rejected = map[string]string{}
		}
		for section, msg := range sections {
			p.rejected[section] = msg
		}
		rewrite()
	}
	out := Outcome{Reason: reason, Duration: p.clock.Since(start), Err: err, Recreated: recreated, Dropped: slices.Sorted(maps.Keys(p.rejected)),
		Undeclared: slices.Sorted(maps.Keys(p.undeclared))}
	if err != nil {
		p.backoff = min(p.cfg.BackoffMax, max(p.cfg.BackoffInitial, 2*p.backoff))
		p.backoffUntil = p.clock.Now().Add(wait.Jitter(p.backoff, backoffJitter))
		return out
	}
	p.backoff, p.backoffUntil = 0, time.Time{}
	p.last, p.lastTime = st, now
	p.heartbeat = p.cfg.Heartbeat - time.Duration(p.cfg.HeartbeatJitter*rand.Float64()*float64(p.cfg.Heartbeat))
	out.Published = true
	return out
}

// rejectedSections returns the sections an Invalid (422) error names in
// its causes ("status.gpus[16]", "status.numa[0].cpus"), with the server's
// message for each; nil for any other error, or when a cause names
// something no section holds (then the whole write fails and backs off).
func rejectedSections(err error) map[string]string {
	if !apierrors.IsInvalid(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	out := map[string]string{}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "" || c.Field == "<nil>" {
			// A note of the server's own ("some validation rules were
			// not checked because the object was invalid"), not a
			// refusal of anything.
			continue
		}
		field, ok := strings.CutPrefix(c.Field, "status.")
		if !ok {
			return nil
		}
		section := field[:strings.IndexAny(field+".", ".[")]
		if _, ok := telemetryv1alpha1.SectionSource(section); !ok {
			return nil
		}
		msg := c.Field + ": " + c.Message
		if prev, ok := out[section]; ok {
			msg = prev + "; " + msg
		}
		out[section] = msg
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// undeclaredPattern finds the fields a server-side apply names in its
// refusal of fields the schema lacks, one per line or after a colon:
// "failed to create typed patch object (…): .status.speed: field not
// declared in schema", or "…: errors:\n  .status.speed: field not declared
// in schema\n  .status.summary.speed: field not declared in schema".
var undeclaredPattern = regexp.MustCompile(`(\.status\S*): field not declared in schema`)

// undeclaredFields returns the status fields a refusal from server-side
// apply names as not declared in the CRD's schema; nil for any other
// error. kube-apiserver v1.37 answers it as a 500 (InternalError: the
// field manager's error is passed on as it is); a 400 is taken too.
func undeclaredFields(err error) []string {
	if !apierrors.IsInternalError(err) && !apierrors.IsBadRequest(err) {
		return nil
	}
	var out []string
	for _, m := range undeclaredPattern.FindAllStringSubmatch(err.Error(), -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// knowsUndeclared reports whether every field is left out already: then
// leaving them out did not help, and the write fails as it is rather than
// be tried again and again.
func (p *Publisher) knowsUndeclared(fields []string) bool {
	for _, f := range fields {
		if !p.undeclared[f] {
			return false
		}
	}
	return true
}

// trim returns st without the sections the API server refused, their
// sources saying so; st itself when there are none.
func (p *Publisher) trim(st *telemetryv1alpha1.NodeTelemetryStatus) *telemetryv1alpha1.NodeTelemetryStatus {
	if len(p.rejected) == 0 {
		return st
	}
	out := st.DeepCopy()
	for section, msg := range p.rejected {
		source, _ := telemetryv1alpha1.SectionSource(section)
		switch section {
		case "cpu":
			out.CPU = nil
		case "memory":
			out.Memory = nil
		case "thermal":
			out.Thermal = nil
		case "power":
			out.Power = nil
		case "numa":
			out.NUMA = nil
		case "gpus":
			out.GPUs = nil
		}
		for i := range out.Sources {
			if out.Sources[i].Name == source {
				out.Sources[i].State = telemetryv1alpha1.SourceFailed
				out.Sources[i].Reason = "RejectedByAPIServer"
				out.Sources[i].Message = text.Truncate("the API server refused this section, left out until the next heartbeat: "+msg, 256)
			}
		}
	}
	return out
}

// write applies the status, creating the object first if it is missing.
func (p *Publisher) write(ctx context.Context, st *telemetryv1alpha1.NodeTelemetryStatus) (recreated bool, err error) {
	if !p.ensured {
		if err := p.ensureObject(ctx); err != nil {
			return false, err
		}
	}
	err = p.applyStatus(ctx, st)
	if apierrors.IsNotFound(err) {
		// Deleted since we last wrote: create it again and retry once.
		p.ensured = false
		if err := p.ensureObject(ctx); err != nil {
			return false, err
		}
		return true, p.applyStatus(ctx, st)
	}
	return false, err
}

// ensureObject applies the object's metadata: its name and its owner
// reference to the Node, so it is garbage-collected with the Node.
func (p *Publisher) ensureObject(ctx context.Context) error {
	node, err := p.client.GetNode(ctx, p.cfg.NodeName)
	if err != nil {
		return fmt.Errorf("getting Node %s for the owner reference: %w", p.cfg.NodeName, err)
	}
	body := applyBody{
		APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(),
		Kind:       "NodeTelemetry",
		Metadata: applyMeta{Name: p.cfg.NodeName, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}}},
	}
	if err := p.apply(ctx, body, ""); err != nil {
		return fmt.Errorf("applying NodeTelemetry %s: %w", p.cfg.NodeName, err)
	}
	p.ensured = true
	return nil
}

func (p *Publisher) applyStatus(ctx context.Context, st *telemetryv1alpha1.NodeTelemetryStatus) error {
	body := applyBody{
		APIVersion: telemetryv1alpha1.SchemeGroupVersion.String(),
		Kind:       "NodeTelemetry",
		Metadata:   applyMeta{Name: p.cfg.NodeName},
		Status:     st,
	}
	if len(p.undeclared) > 0 {
		pruned, err := withoutFields(st, slices.Sorted(maps.Keys(p.undeclared)))
		if err != nil {
			return err
		}
		body.Status = pruned
	}
	if err := p.apply(ctx, body, "status"); err != nil {
		return fmt.Errorf("applying NodeTelemetry %s status: %w", p.cfg.NodeName, err)
	}
	return nil
}

// applyBody is the apply configuration the agent sends: only the fields it
// owns, so server-side apply never takes ownership of anything else.
type applyBody struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Metadata   applyMeta `json:"metadata"`
	// Status is a *NodeTelemetryStatus, or its JSON object less the
	// fields the CRD does not declare; nil leaves it out.
	Status any `json:"status,omitempty"`
}

type applyMeta struct {
	Name            string                  `json:"name"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

func (p *Publisher) apply(ctx context.Context, body applyBody, subresource string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	path := "/apis/" + telemetryv1alpha1.GroupName + "/" + telemetryv1alpha1.SchemeGroupVersion.Version + "/nodetelemetries/" + p.cfg.NodeName
	if subresource != "" {
		path += "/" + subresource
	}
	return p.client.Apply(ctx, path, data, p.cfg.FieldManager)
}

// withoutFields returns st as a JSON object less the fields, each a path
// as server-side apply names it (".status.summary.speed"). A list's element
// in a path (".status.gpus[uuid=\"GPU-1\"].speed", ".status.numa[0].x")
// stands for every element of that list, as the field is missing from the
// element's schema, not from one element.
func withoutFields(st *telemetryv1alpha1.NodeTelemetryStatus, fields []string) (map[string]any, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	for _, f := range fields {
		rest, ok := strings.CutPrefix(f, ".status.")
		if !ok {
			continue
		}
		deletePath(obj, pathSegments(rest))
	}
	return obj, nil
}

// pathSegment is one step of a field path: a field's name, and whether
// the path goes on into every element of the list the field holds.
type pathSegment struct {
	name string
	list bool
}

// pathSegments splits "summary.speed" or `gpus[uuid="a.b"].speed` at the
// dots outside brackets.
func pathSegments(path string) []pathSegment {
	var segs []pathSegment
	var cur pathSegment
	depth, inQuote := 0, false
	start := 0
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case inQuote:
			if c == '\\' {
				i++
			} else if c == '"' {
				inQuote = false
			}
		case c == '"' && depth > 0:
			inQuote = true
		case c == '[':
			if depth == 0 && cur.name == "" {
				cur.name = path[start:i]
			}
			depth++
			cur.list = true
		case c == ']':
			depth--
		case c == '.' && depth == 0:
			if cur.name == "" {
				cur.name = path[start:i]
			}
			segs = append(segs, cur)
			cur, start = pathSegment{}, i+1
		}
	}
	if cur.name == "" {
		cur.name = path[start:]
	}
	return append(segs, cur)
}

func deletePath(obj map[string]any, segs []pathSegment) {
	if len(segs) == 0 || obj == nil {
		return
	}
	s := segs[0]
	if len(segs) == 1 && !s.list {
		delete(obj, s.name)
		return
	}
	if !s.list {
		next, _ := obj[s.name].(map[string]any)
		deletePath(next, segs[1:])
		return
	}
	items, _ := obj[s.name].([]any)
	for _, it := range items {
		next, _ := it.(map[string]any)
		deletePath(next, segs[1:])
	}
}

// LastPublished returns the time of the last successful write, zero if none.
func (p *Publisher) LastPublished() time.Time { return p.lastTime }
