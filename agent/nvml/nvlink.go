// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVLinks reads each link's state (nvmlDeviceGetNvLinkState) up to
// NVML_NVLINK_MAX_LINKS, and for each active one the PCI bus id of its
// remote end (nvmlDeviceGetNvLinkRemotePciInfo) and, where the driver has
// it, the remote end's kind (nvmlDeviceGetNvLinkRemoteDeviceType, newer
// than the other two). nvml.h: the state call answers
// NVML_ERROR_INVALID_ARGUMENT for a link the GPU does not have and
// NVML_ERROR_NOT_SUPPORTED where the device lacks the feature; the first
// ends the walk, the second skips the link. A GPU none of whose links is
// supported has no NVLink: ErrNotSupported.
func (d *device) NVLinks() ([]NVLink, error) {
	if !d.calls.nvLinks {
		return nil, missingCall("nvmlDeviceGetNvLinkState")
	}
	var links []NVLink
	supported := false
	for l := range gonvml.NVLINK_MAX_LINKS {
		state, ret := d.h.GetNvLinkState(l)
		if ret == gonvml.ERROR_INVALID_ARGUMENT {
			break
		}
		if ret == gonvml.ERROR_NOT_SUPPORTED {
			continue
		}
		if err := errorFor("nvmlDeviceGetNvLinkState", ret); err != nil {
			return nil, fmt.Errorf("link %d: %w", l, err)
		}
		supported = true
		if state != gonvml.FEATURE_ENABLED {
			continue
		}
		link := NVLink{Link: l}
		// Either end may be unknown (NOT_SUPPORTED) without the link
		// being any less up.
		pci, ret := d.h.GetNvLinkRemotePciInfo(l)
		if err := errorFor("nvmlDeviceGetNvLinkRemotePciInfo", ret); err != nil && ret != gonvml.ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("link %d: %w", l, err)
		} else if err == nil {
			link.RemoteBusID = cString(pci.BusId[:])
		}
		if d.calls.nvLinkRemoteType {
			typ, ret := d.h.GetNvLinkRemoteDeviceType(l)
			if err := errorFor("nvmlDeviceGetNvLinkRemoteDeviceType", ret); err != nil && ret != gonvml.ERROR_NOT_SUPPORTED {
				return nil, fmt.Errorf("link %d: %w", l, err)
			} else if err == nil {
				link.Remote = remoteKind(typ)
			}
		}
		links = append(links, link)
	}
	if !supported {
		return nil, fmt.Errorf("nvmlDeviceGetNvLinkState: no link: %w", ErrNotSupported)
	}
	return links, nil
}

// remoteKind maps nvmlIntNvLinkDeviceType_t.
func remoteKind(t gonvml.IntNvLinkDeviceType) NVLinkRemote {
	switch t {
	case gonvml.NVLINK_DEVICE_TYPE_GPU:
		return NVLinkRemoteGPU
	case gonvml.NVLINK_DEVICE_TYPE_SWITCH:
		return NVLinkRemoteSwitch
	case gonvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return NVLinkRemoteOther
	}
	return NVLinkRemoteUnknown
}
