// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cowmap

import (
	"maps"
	"testing"
)

func TestWith(t *testing.T) {
	m := map[string]int{"a": 1, "bb": 2}
	added := With(m, "ccc", 3, false)
	if want := map[string]int{"a": 1, "bb": 2, "ccc": 3}; !maps.Equal(added, want) {
		t.Errorf("With(add) = %v, want %v", added, want)
	}
	replaced := With(added, "a", 9, false)
	if want := map[string]int{"a": 9, "bb": 2, "ccc": 3}; !maps.Equal(replaced, want) {
		t.Errorf("With(replace) = %v, want %v", replaced, want)
	}
	removed := With(replaced, "bb", 0, true)
	if want := map[string]int{"a": 9, "ccc": 3}; !maps.Equal(removed, want) {
		t.Errorf("With(remove) = %v, want %v", removed, want)
	}
	if want := map[string]int{"a": 1, "bb": 2}; !maps.Equal(m, want) {
		t.Errorf("the original changed: %v", m)
	}
}
