// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package estimate

import (
	"fmt"

	"k8s.io/client-go/informers"

	"github.com/telesched/telesched/scheduler/dra"
)

// Claims is the book's index of DRA's GPUs (the process's one): what the
// counter reads for a pod's ClaimGPUs, and what TopologyFit reads for a
// node's GPUs held by claims.
func (b *Book) Claims() *dra.Index { return b.claims }

// ShareDRA sets which DRA device classes and drivers count GPUs
// (TopologyFitArgs' gpuDeviceClassNames, migDeviceClassNames and
// gpuDriverNames; without a
// call, dra.DefaultConfig), as ShareDefaultRequests does the default
// requests: an error when another plugin set others first. Call it before
// the informers start.
func (b *Book) ShareDRA(who string, cfg dra.Config) error {
	b.settingsMu.Lock()
	defer b.settingsMu.Unlock()
	if err := b.draShared.agree("DRA GPU device classes and drivers (gpuDeviceClassNames, migDeviceClassNames, gpuDriverNames)", who,
		fmt.Sprintf("%v %v %v", cfg.DeviceClasses, cfg.MIGDeviceClasses, cfg.Drivers)); err != nil {
		return err
	}
	b.claims.SetConfig(cfg)
	return nil
}

// WatchClaims follows ResourceSlices and ResourceClaims through the
// scheduler's informers, for the claims' GPUs; only the first call (of
// any plugin) registers anything.
func (b *Book) WatchClaims(factory informers.SharedInformerFactory) error {
	return b.claims.Watch(factory)
}
