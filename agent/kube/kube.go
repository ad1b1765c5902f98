// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube is the agent's narrow API client. The agent makes four
// kinds of call: it reads its Node, reads its NodeTelemetry once at start
// (to resume its models), applies its NodeTelemetry and creates Events. A REST client over a core/v1-only scheme does all three; client-
// go's full clientset would register every API group at start-up and, on
// every node of the fleet, cost the agent about 15 MiB more resident memory.
package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Client calls the API server.
type Client struct {
	rest rest.Interface
}

// New returns a Client for cfg.
func New(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
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

// GetNode reads a Node.
func (c *Client) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := c.rest.Get().AbsPath("/api/v1/nodes", name).Do(ctx).Into(node)
	return node, err
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
	Type      string // corev1.EventTypeNormal or Warning
	Reason    string
	Message   string
	Component string
}

// CreateEvent records an Event on a Node, in the default namespace, with
// the node's name as the involved object's UID as the kubelet does
// (`kubectl describe node` finds Node events that way).
func (c *Client) CreateEvent(ctx context.Context, e Event, now time.Time) error {
	ts := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", e.Node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: e.Node, UID: types.UID(e.Node)},
		Reason:              e.Reason,
		Message:             e.Message,
		Type:                e.Type,
		Source:              corev1.EventSource{Component: e.Component, Host: e.Node},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: e.Component,
		ReportingInstance:   e.Node,
	}
	return c.rest.Post().AbsPath("/api/v1/namespaces", metav1.NamespaceDefault, "events").Body(ev).Do(ctx).Error()
}
