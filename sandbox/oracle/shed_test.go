// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package oracle_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/telesched/telesched/sandbox/oracle"
)

func TestFewestToShed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pods    []int64
		need    int64 // under when at least this much is removed
		want    int
		wantSet []int
	}{
		{name: "already under", pods: []int64{1000, 2000}, need: 0, want: 0},
		{name: "one big pod beats two small ones", pods: []int64{500, 500, 3000}, need: 900, want: 1, wantSet: []int{2}},
		{name: "two needed", pods: []int64{2000, 2000, 2000, 2000}, need: 3500, want: 2, wantSet: []int{0, 1}},
		{name: "three of mixed sizes", pods: []int64{1000, 2000, 4000, 500}, need: 6500, want: 3, wantSet: []int{0, 1, 2}},
		{name: "not even all", pods: []int64{1000, 1000}, need: 5000, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, set := oracle.FewestToShed(len(tc.pods), func(removed []int) bool {
				var m int64
				for _, i := range removed {
					m += tc.pods[i]
				}
				return m >= tc.need
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("count (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSet, set); diff != "" {
				t.Errorf("subset (-want +got):\n%s", diff)
			}
		})
	}
}
