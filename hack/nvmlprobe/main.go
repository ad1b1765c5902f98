// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// nvmlprobe prints, as JSON lines, what NVML returns on this machine for the
// calls the agent's GPU collector makes or considers: the driver, which
// symbols the library has, each GPU's identity, MIG mode and MIG devices,
// the GPU-instance profiles, NVLink state per link and the common ancestor
// of each pair of GPUs. It records real machines for the agent's tests
// (agent/nvml/testdata); it changes nothing on the GPU.
//
//	CGO_ENABLED=1 go build -o bin/nvmlprobe ./hack/nvmlprobe && bin/nvmlprobe
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func out(kv ...any) {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if r, ok := v.(nvml.Return); ok {
			v = nvml.ErrorString(r)
		}
		m[fmt.Sprint(kv[i])] = v
	}
	b, _ := json.Marshal(m)
	fmt.Println(string(b))
}

func main() {
	l := nvml.New()
	if r := l.Init(); r != nvml.SUCCESS {
		out("init", r)
		os.Exit(1)
	}
	defer l.Shutdown()
	dv, r := l.SystemGetDriverVersion()
	nv, _ := l.SystemGetNVMLVersion()
	cv, _ := l.SystemGetCudaDriverVersion()
	out("driver", dv, "ret", r, "nvml", nv, "cuda", cv)
	for _, sym := range []string{"nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetGpuInstanceProfileInfo"} {
		out("symbol", sym, "present", l.Extensions().LookupSymbol(sym) == nil)
	}
	n, r := l.DeviceGetCount()
	out("count", n, "ret", r)
	var devs []nvml.Device
	for i := 0; i < n; i++ {
		d, r := l.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			out("gpu", i, "handle", r)
			continue
		}
		devs = append(devs, d)
		name, _ := d.GetName()
		uuid, _ := d.GetUUID()
		pci, _ := d.GetPciInfo()
		cur, pend, mr := d.GetMigMode()
		maxMig, mmr := d.GetMaxMigDeviceCount()
		util, ur := d.GetUtilizationRates()
		mem, _ := d.GetMemoryInfo()
		arch, ar := d.GetArchitecture()
		major, minor, _ := d.GetCudaComputeCapability()
		attrs, atr := d.GetAttributes()
		out("gpu", i, "name", name, "uuid", uuid, "busId", string(trim(pci.BusId[:])), "migCurrent", cur, "migPending", pend, "migRet", mr,
			"maxMigDevices", maxMig, "maxMigRet", mmr, "util", util, "utilRet", ur, "memTotal", mem.Total, "arch", arch, "archRet", ar,
			"cc", fmt.Sprintf("%d.%d", major, minor), "attrs", attrs, "attrsRet", atr)
		for _, p := range []int{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GPU_INSTANCE_PROFILE_7_SLICE} {
			info, pr := d.GetGpuInstanceProfileInfo(p)
			out("gpu", i, "giProfile", p, "info", info, "ret", pr)
		}
		for m := 0; m < maxMig; m++ {
			md, r := d.GetMigDeviceHandleByIndex(m)
			if r != nvml.SUCCESS {
				out("gpu", i, "mig", m, "ret", r)
				continue
			}
			mu, _ := md.GetUUID()
			ma, mar := md.GetAttributes()
			gi, gr := md.GetGpuInstanceId()
			ci, cr := md.GetComputeInstanceId()
			mut, mur := md.GetUtilizationRates()
			out("gpu", i, "mig", m, "uuid", mu, "attrs", ma, "attrsRet", mar, "gi", gi, "giRet", gr, "ci", ci, "ciRet", cr, "util", mut, "utilRet", mur)
		}
		for link := 0; link < 18; link++ {
			st, sr := d.GetNvLinkState(link)
			if sr == nvml.ERROR_INVALID_ARGUMENT || sr == nvml.ERROR_NOT_SUPPORTED {
				out("gpu", i, "link", link, "stateRet", sr)
				break
			}
			rp, rr := d.GetNvLinkRemotePciInfo(link)
			rt, tr := d.GetNvLinkRemoteDeviceType(link)
			ver, vr := d.GetNvLinkVersion(link)
			out("gpu", i, "link", link, "state", st, "stateRet", sr, "remoteBus", string(trim(rp.BusId[:])), "remoteRet", rr, "remoteType", rt, "typeRet", tr, "version", ver, "verRet", vr)
		}
	}
	for i := range devs {
		for j := range devs {
			lvl, r := devs[i].GetTopologyCommonAncestor(devs[j])
			out("pair", fmt.Sprintf("%d-%d", i, j), "level", lvl, "ret", r)
		}
	}
}

func trim[T int8 | uint8](b []T) []byte {
	var o []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		o = append(o, byte(c))
	}
	return o
}
