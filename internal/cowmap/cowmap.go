// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cowmap builds the copies of the read-only maps that the
// scheduler's lock-free readers load: a map is copied on every write
// (rare: a node's first view, or its deletion) and never changed after it
// is published.
package cowmap

import "strings"

// With returns a copy of m with key set to v, or without key when remove
// is true. The copy stores every key's bytes side by side in one
// allocation rather than in the allocations the keys came from: the first
// lookup of a key in a scheduling cycle costs memory latency far more than
// arithmetic, and keys that sit together share cache lines.
func With[V any](m map[string]V, key string, v V, remove bool) map[string]V {
	size := len(key)
	for k := range m {
		size += len(k)
	}
	out := make(map[string]V, len(m)+1)
	var keys strings.Builder
	keys.Grow(size)
	add := func(k string, v V) {
		start := keys.Len()
		keys.WriteString(k)
		out[keys.String()[start:]] = v // a view into the builder's buffer: Grow sized it for every key
	}
	for k, old := range m {
		if k != key {
			add(k, old)
		}
	}
	if !remove {
		add(key, v)
	}
	return out
}
