// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube is the agent's narrow API client. The agent reads its Node,
// reads its NodeTelemetry once at start (to resume its models), applies its
// NodeTelemetry, creates Events, and patches its Node's overheating taint
// and condition. A REST client that sends and reads JSON bodies does all of
// it, over a scheme
// that holds only meta/v1's Status (so an API error keeps its reason and
// causes). client-go's full clientset would register every API group at
// start-up, and k8s.io/api/core/v1's types alone, linked in for the Node
// and the Event, make the binary about 4 MiB larger; its pages are part of
// the agent's resident memory on every node of the fleet.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Event types (core/v1 EventTypeNormal and EventTypeWarning).
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// coreV1 is the core API group's version.
var coreV1 = schema.GroupVersion{Version: "v1"}

// Client calls the API server.
type Client struct {
	rest rest.Interface
}

// New returns a Client for cfg.
func New(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, coreV1)
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &coreV1
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &Client{rest: rc}, nil
}

// Node is what the agent reads of its Node.
type Node struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	// Labels are the Node's labels.
	Labels map[string]string
	// Taints are the Node's taints as the API server sent them, so that a
	// patch that changes one sends the others back unchanged, whatever
	// fields they carry.
	Taints []json.RawMessage
	// Conditions are the Node's status conditions.
	Conditions []NodeCondition
}

// GetNode reads a Node's name, UID, resourceVersion, labels, taints and
// conditions.
func (c *Client) GetNode(ctx context.Context, name string) (*Node, error) {
	raw, err := c.rest.Get().AbsPath("/api/v1/nodes", name).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var obj struct {
		Metadata struct {
			Name            string            `json:"name"`
			UID             types.UID         `json:"uid"`
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Taints []json.RawMessage `json:"taints"`
		} `json:"spec"`
		Status struct {
			Conditions []NodeCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding Node %s: %w", name, err)
	}
	return &Node{Name: obj.Metadata.Name, UID: obj.Metadata.UID, ResourceVersion: obj.Metadata.ResourceVersion,
		Labels: obj.Metadata.Labels, Taints: obj.Spec.Taints, Conditions: obj.Status.Conditions}, nil
}

// TaintKey is the key of a taint as the API server sent it; "" when it
// does not decode.
func TaintKey(raw json.RawMessage) string {
	var t struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Key
}

// SetNodeTaints replaces a Node's taints with a JSON merge patch that
// carries the resourceVersion the taints were read at, so a write by
// anyone else in between fails with a Conflict (apierrors.IsConflict)
// instead of being overwritten: taints are one atomic list.
func (c *Client) SetNodeTaints(ctx context.Context, name, resourceVersion string, taints []json.RawMessage) error {
	if taints == nil {
		taints = []json.RawMessage{}
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return err
	}
	return c.rest.Patch(types.MergePatchType).AbsPath("/api/v1/nodes", name).Body(body).Do(ctx).Error()
}

// NodeCondition is a core/v1 NodeCondition, with its JSON names.
type NodeCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastHeartbeatTime  metav1.Time `json:"lastHeartbeatTime"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message"`
}

// SetNodeCondition sets one condition of a Node's status with a strategic
// merge patch, as the kubelet writes its own: conditions merge by type, so
// the others stay as they are.
func (c *Client) SetNodeCondition(ctx context.Context, name string, cond NodeCondition) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []NodeCondition{cond}}})
	if err != nil {
		return err
	}
	return c.rest.Patch(types.StrategicMergePatchType).AbsPath("/api/v1/nodes", name, "status").Body(body).Do(ctx).Error()
}

// GetRaw reads the object at path (an absolute API path) as JSON.
func (c *Client) GetRaw(ctx context.Context, path string) ([]byte, error) {
	return c.rest.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
}

// Apply sends a server-side apply patch to the object at path (an absolute
// API path, e.g. ".../nodetelemetries/<name>/status"), forcing ownership
// of the fields it sets.
func (c *Client) Apply(ctx context.Context, path string, body []byte, fieldManager string) error {
	return c.rest.Patch(types.ApplyPatchType).AbsPath(path).
		Param("fieldManager", fieldManager).
		Param("force", "true").
		Body(body).
		Do(ctx).Error()
}

// Event is one Kubernetes Event about a Node.
type Event struct {
	Node      string
	Type      string // EventTypeNormal or EventTypeWarning
	Reason    string
	Message   string
	Component string
}

// CreateEvent records an Event on a Node, in the default namespace, with
// the node's name as the involved object's UID as the kubelet does
// (`kubectl describe node` finds Node events that way).
func (c *Client) CreateEvent(ctx context.Context, e Event, now time.Time) error {
	ts := metav1.NewTime(now)
	body, err := json.Marshal(coreEvent{
		APIVersion: "v1",
		Kind:       "Event",
		Metadata: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", e.Node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject:      objectReference{Kind: "Node", APIVersion: "v1", Name: e.Node, UID: types.UID(e.Node)},
		Reason:              e.Reason,
		Message:             e.Message,
		Type:                e.Type,
		Source:              eventSource{Component: e.Component, Host: e.Node},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: e.Component,
		ReportingInstance:   e.Node,
	})
	if err != nil {
		return err
	}
	return c.rest.Post().AbsPath("/api/v1/namespaces", metav1.NamespaceDefault, "events").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
}

// coreEvent is the part of a core/v1 Event the agent writes, with
// core/v1's JSON names.
type coreEvent struct {
	APIVersion          string            `json:"apiVersion"`
	Kind                string            `json:"kind"`
	Metadata            metav1.ObjectMeta `json:"metadata"`
	InvolvedObject      objectReference   `json:"involvedObject"`
	Reason              string            `json:"reason"`
	Message             string            `json:"message"`
	Type                string            `json:"type"`
	Source              eventSource       `json:"source"`
	FirstTimestamp      metav1.Time       `json:"firstTimestamp"`
	LastTimestamp       metav1.Time       `json:"lastTimestamp"`
	Count               int32             `json:"count"`
	ReportingController string            `json:"reportingComponent"`
	ReportingInstance   string            `json:"reportingInstance"`
}

type objectReference struct {
	Kind       string    `json:"kind"`
	APIVersion string    `json:"apiVersion"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

type eventSource struct {
	Component string `json:"component"`
	Host      string `json:"host"`
}
