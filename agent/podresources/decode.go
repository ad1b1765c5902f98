// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package podresources

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of k8s.io/kubelet/pkg/apis/podresources/v1/api.proto
// that the agent reads; every other field is skipped, as a newer kubelet's
// would be.
const (
	fieldResponsePods = 1 // ListPodResourcesResponse.pod_resources

	fieldPodName       = 1 // PodResources.name
	fieldPodNamespace  = 2 // PodResources.namespace
	fieldPodContainers = 3 // PodResources.containers

	fieldContainerName    = 1 // ContainerResources.name
	fieldContainerDevices = 2 // ContainerResources.devices
	fieldContainerCPUIDs  = 3 // ContainerResources.cpu_ids
	fieldContainerDynamic = 5 // ContainerResources.dynamic_resources

	fieldDevicesResourceName = 1 // ContainerDevices.resource_name
	fieldDevicesIDs          = 2 // ContainerDevices.device_ids

	fieldDynamicClaimName      = 2 // DynamicResource.claim_name
	fieldDynamicClaimNamespace = 3 // DynamicResource.claim_namespace
	fieldDynamicClaimResources = 4 // DynamicResource.claim_resources

	fieldClaimCDIDevices = 1 // ClaimResource.cdi_devices
	fieldClaimDriver     = 2 // ClaimResource.driver_name
	fieldClaimPool       = 3 // ClaimResource.pool_name
	fieldClaimDevice     = 4 // ClaimResource.device_name

	fieldCDIName = 1 // CDIDevice.name
)

// Decode decodes a ListPodResourcesResponse.
func Decode(b []byte) (*Response, error) {
	r := &Response{}
	err := fields(b, "ListPodResourcesResponse", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == fieldResponsePods && typ == protowire.BytesType {
			p, err := decodePod(v)
			if err != nil {
				return err
			}
			r.Pods = append(r.Pods, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func decodePod(b []byte) (Pod, error) {
	var p Pod
	err := fields(b, "PodResources", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldPodName:
			p.Name = string(v)
		case fieldPodNamespace:
			p.Namespace = string(v)
		case fieldPodContainers:
			c, err := decodeContainer(v)
			if err != nil {
				return err
			}
			p.Containers = append(p.Containers, c)
		}
		return nil
	})
	return p, err
}

func decodeContainer(b []byte) (Container, error) {
	var c Container
	err := fields(b, "ContainerResources", func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fieldContainerCPUIDs && typ == protowire.VarintType: // unpacked
			c.CPUIDs = append(c.CPUIDs, int64(x))
		case num == fieldContainerCPUIDs && typ == protowire.BytesType: // packed, proto3's default
			for len(v) > 0 {
				x, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return fmt.Errorf("ContainerResources.cpu_ids: %w", protowire.ParseError(n))
				}
				c.CPUIDs = append(c.CPUIDs, int64(x))
				v = v[n:]
			}
		case typ != protowire.BytesType:
		case num == fieldContainerName:
			c.Name = string(v)
		case num == fieldContainerDevices:
			d, err := decodeDevices(v)
			if err != nil {
				return err
			}
			c.Devices = append(c.Devices, d)
		case num == fieldContainerDynamic:
			d, err := decodeDynamic(v)
			if err != nil {
				return err
			}
			c.DynamicResources = append(c.DynamicResources, d)
		}
		return nil
	})
	return c, err
}

func decodeDevices(b []byte) (Devices, error) {
	var d Devices
	err := fields(b, "ContainerDevices", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldDevicesResourceName:
			d.ResourceName = string(v)
		case fieldDevicesIDs:
			d.DeviceIDs = append(d.DeviceIDs, string(v))
		}
		return nil
	})
	return d, err
}

func decodeDynamic(b []byte) (DynamicResource, error) {
	var d DynamicResource
	err := fields(b, "DynamicResource", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldDynamicClaimName:
			d.ClaimName = string(v)
		case fieldDynamicClaimNamespace:
			d.ClaimNamespace = string(v)
		case fieldDynamicClaimResources:
			c, err := decodeClaim(v)
			if err != nil {
				return err
			}
			d.ClaimResources = append(d.ClaimResources, c)
		}
		return nil
	})
	return d, err
}

func decodeClaim(b []byte) (ClaimResource, error) {
	var c ClaimResource
	err := fields(b, "ClaimResource", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldClaimCDIDevices:
			var name string
			if err := fields(v, "CDIDevice", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == fieldCDIName && typ == protowire.BytesType {
					name = string(v)
				}
				return nil
			}); err != nil {
				return err
			}
			c.CDIDevices = append(c.CDIDevices, name)
		case fieldClaimDriver:
			c.DriverName = string(v)
		case fieldClaimPool:
			c.PoolName = string(v)
		case fieldClaimDevice:
			c.DeviceName = string(v)
		}
		return nil
	})
	return c, err
}

// fields calls f with each field of the message b: its number, its wire
// type, its bytes (length-delimited fields) or its value (varints), and
// skips the others' values. It fails on a malformed message, naming it.
func fields(b []byte, message string, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decoding %s: %w", message, protowire.ParseError(n))
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("decoding %s field %d: %w", message, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
