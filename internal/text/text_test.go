// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package text

import (
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789abc", 10, "0123456..."},
		{"temp 71°C hot", 10, "temp 71..."}, // '°' is 2 bytes at 7-8: cut before it
		{"°°°", 3, "°"},                     // no room for the mark; never half a rune
	} {
		got := Truncate(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q (valid UTF-8, at most %d bytes)", tc.in, tc.n, got, tc.want, tc.n)
		}
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("temp 71°C", 8)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Truncate(s, n)
		if len(got) > n && len(s) > n {
			t.Fatalf("Truncate(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
	})
}
