// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package topologyfit

import "testing"

func TestScores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"pack: takes every free GPU", gpuPackScore(4, 4), 100},         // 100*4/4
		{"pack: half of the free GPUs", gpuPackScore(4, 8), 50},         // 100*4/8
		{"pack: one of 8", gpuPackScore(1, 8), 12},                      // 100*1/8 = 12.5
		{"pack: does not fit", gpuPackScore(4, 3), 0},                   // 4 > 3
		{"pack: nothing free", gpuPackScore(1, 0), 0},                   // zero capacity
		{"pack: negative free", gpuPackScore(1, -2), 0},                 // more held than healthy
		{"pack: no GPU requested", gpuPackScore(0, 8), 0},               // not a GPU pod
		{"aligned, full pack", gpuPodScore(true, 100), 100},             // 51 + 100*49/100
		{"aligned, no pack", gpuPodScore(true, 0), 51},                  // 51 + 0
		{"aligned, pack 12", gpuPodScore(true, 12), 56},                 // 51 + 12*49/100 = 51 + 5
		{"unaligned, full pack", gpuPodScore(false, 100), 50},           // 100*50/100: below any aligned node
		{"unaligned, pack 25", gpuPodScore(false, 25), 12},              // 25*50/100 = 12.5
		{"pack out of range is clamped", gpuPodScore(true, 250), 100},   // clamp 250 -> 100
		{"CPU pod off any GPU reserve", nonGPUPodScore(false, 50), 100}, // no penalty
		{"CPU pod in a GPU reserve", nonGPUPodScore(true, 50), 50},      // 100*(100-50)/100
		{"CPU pod on a GPU node, penalty 0", nonGPUPodScore(true, 0), 100},
		{"CPU pod on a GPU node, penalty 100", nonGPUPodScore(true, 100), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%d, want %d", tc.got, tc.want)
			}
		})
	}
}

func TestNUMAFreeCPUMilli(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		logical, allocated int32
		nodeRequested      int64
		numaNodes          int
		want               int64
	}{
		{"published", 64, 16, 100_000, 2, 48_000},               // (64-16)*1000; pod requests ignored
		{"published, all taken", 64, 64, 0, 2, 0},               // (64-64)*1000
		{"estimated", 64, -1, 99_500, 2, 14_250},                // 64000 - 99500/2
		{"estimated, one NUMA node", 32, -1, 8_000, 1, 24_000},  // 32000 - 8000/1
		{"estimated, overcommitted", 8, -1, 40_000, 2, -12_000}, // 8000 - 20000
		{"estimated, no NUMA count", 8, -1, 1_000, 0, 7_000},    // guarded: as one NUMA node
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := numaFreeCPUMilli(tc.logical, tc.allocated, tc.nodeRequested, tc.numaNodes); got != tc.want {
				t.Errorf("numaFreeCPUMilli = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestTakeFromLowest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		matching, held     int64
		wantFree, wantRest int64
	}{
		{"none held", 4, 0, 4, 0},
		{"some held", 4, 1, 3, 0},
		{"all held, more for the next node", 4, 5, 0, 1},
		{"negative held (absorbed elsewhere)", 4, -2, 4, -2},
		{"no matching GPUs", 0, 3, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			free, rest := takeFromLowest(tc.matching, tc.held)
			if free != tc.wantFree || rest != tc.wantRest {
				t.Errorf("takeFromLowest(%d, %d) = %d, %d; want %d, %d", tc.matching, tc.held, free, rest, tc.wantFree, tc.wantRest)
			}
		})
	}
}

func TestContainsFoldASCII(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s, sub string
		want   bool
	}{
		{"NVIDIA H100 80GB HBM3", "h100", true},
		{"NVIDIA H100 80GB HBM3", "nvidia h100", true},
		{"NVIDIA H100 80GB HBM3", "hbm3", true},
		{"NVIDIA H100 80GB HBM3", "a100", false},
		{"NVIDIA A100-SXM4-40GB", "a100-sxm4", true},
		{"NVIDIA A100-SXM4-40GB", "80gb", false},
		{"H1", "h100", false}, // shorter than the pattern
		{"anything", "", true},
		{"Tesla T4", "tesla t4", true},
		// GPU Feature Discovery's nvidia.com/gpu.product: the NVML name
		// with its spaces as dashes.
		{"NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", true},
		{"NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", true},
		{"Tesla T4", "Tesla-T4", true},
		{"NVIDIA A100-SXM4-40GB", "a100 sxm4", true},
		{"NVIDIA H100 80GB HBM3", "NVIDIA-H100-94GB", false},
	} {
		if got := containsFoldASCII(tc.s, lowerASCIIString(tc.sub)); got != tc.want {
			t.Errorf("containsFoldASCII(%q, %q) = %v, want %v", tc.s, tc.sub, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{formatCPU(16_000), "16"},
		{formatCPU(14_250), "14.25"},
		{formatCPU(500), "0.5"},
		{formatCPU(-12_000), "-12"},
		{formatBytes(64 << 30), "64Gi"},
		{formatBytes(411_286_068_265), "383.0Gi"},
		{formatBytes(1536 << 20), "1.5Gi"},
		{formatBytes(512 << 20), "512Mi"},
		{formatBytes(2 << 40), "2Ti"},
		{formatBytes(100), "100"},
		{formatBytes(0), "0"},
		{formatBytes(-2 << 30), "-2Gi"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
