// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"errors"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/agent/nvml/nvmltest"
)

func TestNVLinks(t *testing.T) {
	switchLinks := func() []NVLink {
		var out []NVLink
		for l := range 12 {
			out = append(out, NVLink{Link: l, Remote: NVLinkRemoteSwitch, RemoteBusID: nvmltest.SwitchBusID(l / 2)})
		}
		return out
	}
	tests := []struct {
		name    string
		setup   func(s *dgxa100.Server)
		missing []string
		want    []NVLink
		wantIs  error
	}{
		{
			name:  "DGX A100: 12 links to six NVSwitches",
			setup: nvmltest.NVSwitchFabric,
			want:  switchLinks(),
		},
		{
			name:  "pairs: four links to the peer GPU, eight down",
			setup: nvmltest.NVLinkPairs,
			want: []NVLink{
				{Link: 0, Remote: NVLinkRemoteGPU, RemoteBusID: nvmltest.BusID(1)},
				{Link: 1, Remote: NVLinkRemoteGPU, RemoteBusID: nvmltest.BusID(1)},
				{Link: 2, Remote: NVLinkRemoteGPU, RemoteBusID: nvmltest.BusID(1)},
				{Link: 3, Remote: NVLinkRemoteGPU, RemoteBusID: nvmltest.BusID(1)},
			},
		},
		{
			name:   "no NVLink",
			setup:  func(s *dgxa100.Server) { nvmltest.NoNVLink(gpu(s, 0)) },
			wantIs: ErrNotSupported,
		},
		{
			name:    "a driver without the remote device type: the links, their kind unknown",
			setup:   nvmltest.NVSwitchFabric,
			missing: []string{"nvmlDeviceGetNvLinkRemoteDeviceType"},
			want: func() []NVLink {
				out := switchLinks()
				for i := range out {
					out[i].Remote = NVLinkRemoteUnknown
				}
				return out
			}(),
		},
		{
			name:    "a driver without the remote PCI info",
			setup:   nvmltest.NVSwitchFabric,
			missing: []string{"nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetNvLinkRemotePciInfo_v2"},
			wantIs:  ErrNotSupported,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newServer(t)
			tc.setup(s)
			s.LookupSymbolFunc = func(symbol string) error {
				for _, m := range tc.missing {
					if symbol == m {
						return errors.New("undefined symbol")
					}
				}
				return nil
			}
			for _, m := range tc.missing {
				// A call of a symbol the driver lacks would crash.
				switch m {
				case "nvmlDeviceGetNvLinkRemoteDeviceType":
					gpu(s, 0).GetNvLinkRemoteDeviceTypeFunc = func(int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
						t.Fatalf("%s called on a driver without it", m)
						return 0, gonvml.ERROR_UNKNOWN
					}
				case "nvmlDeviceGetNvLinkRemotePciInfo":
					gpu(s, 0).GetNvLinkRemotePciInfoFunc = func(int) (gonvml.PciInfo, gonvml.Return) {
						t.Fatalf("%s called on a driver without it", m)
						return gonvml.PciInfo{}, gonvml.ERROR_UNKNOWN
					}
				}
			}
			l := NewWith(s)
			mustInit(t, l)
			devs, err := l.Devices()
			if err != nil {
				t.Fatal(err)
			}
			got, err := devs[0].NVLinks()
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) {
					t.Errorf("NVLinks error = %v, want %v", err, tc.wantIs)
				}
			} else if err != nil {
				t.Errorf("NVLinks: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NVLinks (-want +got):\n%s", diff)
			}
		})
	}
}
