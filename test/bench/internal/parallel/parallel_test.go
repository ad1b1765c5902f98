// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestRun(t *testing.T) {
	var calls atomic.Int64
	seen := make([]atomic.Bool, 100)
	if err := Run(100, 7, func(i int) error { calls.Add(1); seen[i].Store(true); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if !seen[i].Load() {
			t.Errorf("index %d never ran", i)
		}
	}
	if calls.Load() != 100 {
		t.Errorf("%d calls, want 100", calls.Load())
	}
	boom := errors.New("boom")
	if err := Run(10, 2, func(i int) error {
		if i == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("Run = %v, want the failure", err)
	}
}
