// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(math.MaxInt64)
	for _, tc := range []struct {
		name                    string
		gomemlimit, limit, frac string
		want                    int64
		wantErr                 bool
	}{
		{name: "90 % of the limit", limit: "100663296", want: 90596966},
		{name: "a fraction of one's own", limit: "100663296", frac: "0.75", want: 75497472},
		{name: "GOMEMLIMIT wins", gomemlimit: "50MiB", limit: "100663296", want: 0},
		{name: "no limit", want: 0},
		{name: "a limit that is no number", limit: "96Mi", wantErr: true},
		{name: "a fraction out of range", limit: "100663296", frac: "0.2", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			if tc.gomemlimit != "" {
				t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			}
			t.Setenv(LimitEnv, tc.limit)
			t.Setenv(FractionEnv, tc.frac)
			got, err := Apply()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Apply() = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
			if tc.want > 0 && debug.SetMemoryLimit(-1) != tc.want {
				t.Errorf("the runtime's limit is %d, want %d", debug.SetMemoryLimit(-1), tc.want)
			}
		})
	}
}
