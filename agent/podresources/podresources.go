// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podresources is the agent's client of the kubelet's pod-resources
// API (k8s.io/kubelet/pkg/apis/podresources/v1, PodResourcesLister.List):
// which exclusive CPUs and which devices the kubelet has given each
// container.
//
// The API is gRPC over the kubelet's unix socket. A unary gRPC call is an
// HTTP/2 POST of one length-prefixed protobuf message, answered by one
// length-prefixed message and the call's status in the trailers
// (grpc/grpc, doc/PROTOCOL-HTTP2.md). This client makes that call with the
// standard library's HTTP/2 over the socket and decodes the answer's
// protobuf with protowire, which the agent links anyway (the Prometheus
// client's exposition needs it), instead of linking gRPC's client and the
// generated package, which brings gRPC, html/template and x/net/trace into
// the binary: about 1 MiB of the agent's resident memory on every node.
// Tests hold it to the kubelet's own generated types and a real gRPC
// server.
package podresources

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Response is what List answers, ListPodResourcesResponse, with the fields
// the agent reads.
type Response struct {
	Pods []Pod
}

// Pod is a PodResources.
type Pod struct {
	Name, Namespace string
	Containers      []Container
}

// Container is a ContainerResources.
type Container struct {
	Name             string
	Devices          []Devices
	CPUIDs           []int64
	DynamicResources []DynamicResource
}

// Devices is a ContainerDevices: the device plugin's devices of one
// resource.
type Devices struct {
	ResourceName string
	DeviceIDs    []string
}

// DynamicResource is a DynamicResource: the devices of one claim.
type DynamicResource struct {
	ClaimName, ClaimNamespace string
	ClaimResources            []ClaimResource
}

// ClaimResource is a ClaimResource: one device of a claim.
type ClaimResource struct {
	CDIDevices                       []string
	DriverName, PoolName, DeviceName string
}

// DefaultMaxMessage bounds the size of List's answer (the kubelet's own
// clients allow 16 MiB).
const DefaultMaxMessage = 16 << 20

// listPath is the method's HTTP/2 path: /<package>.<service>/<method>.
const listPath = "/v1.PodResourcesLister/List"

// Client calls the pod-resources API on one unix socket. Its HTTP/2
// connection is kept between calls.
type Client struct {
	http       *http.Client
	tr         *http.Transport
	maxMessage int
}

// New returns a client of the socket at path, whose answers may be at most
// maxMessage bytes.
func New(path string, maxMessage int) *Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true) // gRPC over a unix socket: HTTP/2 with prior knowledge
	tr := &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
		IdleConnTimeout:    5 * time.Minute,
	}
	return &Client{http: &http.Client{Transport: tr}, tr: tr, maxMessage: maxMessage}
}

// Close closes the client's connection.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// StatusError is a call that the server answered with a gRPC status other
// than OK.
type StatusError struct {
	Code    int // gRPC status code, e.g. 12 Unimplemented, 14 Unavailable
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", codeName(e.Code), e.Message)
}

// codeName is the name of a gRPC status code (grpc/grpc, doc/statuscodes.md).
func codeName(code int) string {
	names := [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
		"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal",
		"Unavailable", "DataLoss", "Unauthenticated"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "Code(" + strconv.Itoa(code) + ")"
}

// emptyMessage is an empty request message, length-prefixed: not
// compressed, 0 bytes.
var emptyMessage = [5]byte{}

// List calls PodResourcesLister.List.
func (c *Client) List(ctx context.Context) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+listPath, bytes.NewReader(emptyMessage[:]))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	if d, ok := ctx.Deadline(); ok {
		// The server gives up when the caller does (grpc-timeout, in
		// milliseconds; at most 8 digits).
		req.Header.Set("Grpc-Timeout", strconv.FormatInt(min(max(time.Until(d).Milliseconds(), 1), 99_999_999), 10)+"m")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pod-resources List: HTTP status %s", resp.Status)
	}
	// A call that fails at once is answered by headers alone
	// ("Trailers-Only").
	if err := status(resp.Header); err != nil {
		return nil, err
	}
	msg, err := c.readMessage(resp.Body)
	if err != nil {
		return nil, err
	}
	// Drain to the end of the stream, where the status comes.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10)); err != nil {
		return nil, fmt.Errorf("pod-resources List: %w", err)
	}
	if resp.Trailer.Get("Grpc-Status") == "" {
		return nil, errors.New("pod-resources List: the answer ended without a gRPC status")
	}
	if err := status(resp.Trailer); err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, errors.New("pod-resources List: the server answered OK without a message")
	}
	return Decode(msg)
}

// readMessage reads one length-prefixed message; nil when the stream ends
// before one starts.
func (c *Client) readMessage(body io.Reader) ([]byte, error) {
	var prefix [5]byte
	if _, err := io.ReadFull(body, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("pod-resources List: reading the answer: %w", err)
	}
	if prefix[0] != 0 {
		return nil, fmt.Errorf("pod-resources List: the answer is compressed (flag %d), and none was asked for", prefix[0])
	}
	n := binary.BigEndian.Uint32(prefix[1:])
	if int64(n) > int64(c.maxMessage) {
		return nil, fmt.Errorf("pod-resources List: the answer is %d bytes, more than the %d allowed", n, c.maxMessage)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(body, msg); err != nil {
		return nil, fmt.Errorf("pod-resources List: reading the answer's %d bytes: %w", n, err)
	}
	return msg, nil
}

// status returns the gRPC status in h as an error, nil when it is OK or
// absent.
func status(h http.Header) error {
	s := h.Get("Grpc-Status")
	if s == "" || s == "0" {
		return nil
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("pod-resources List: bad grpc-status %q", s)
	}
	// grpc-message is percent-encoded.
	msg, err := url.PathUnescape(h.Get("Grpc-Message"))
	if err != nil {
		msg = h.Get("Grpc-Message")
	}
	return &StatusError{Code: code, Message: msg}
}
