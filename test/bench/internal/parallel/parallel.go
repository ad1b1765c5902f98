// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package parallel is what the benchmark commands share for creating
// objects in bulk.
package parallel

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Run calls f(0..n-1) on workers goroutines. A worker whose call fails
// stops; Run returns every failure joined.
func Run(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs error
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}
