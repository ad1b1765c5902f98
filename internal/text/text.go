// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package text holds small string helpers shared by the agent's packages.
package text

import "unicode/utf8"

// Truncate shortens s to at most n bytes without splitting a UTF-8 rune,
// marking the cut with "..." when n leaves room for it.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := "..."
	if n < 2*len(mark) {
		mark = ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
