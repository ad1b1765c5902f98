// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestEveryFlagIsDocumented: docs/configuration.md says it lists every
// flag of the agent; each of Options.AddFlags' flags is named there (in
// backquotes, as its tables name them).
func TestEveryFlagIsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	fs := pflag.NewFlagSet("telesched-agent", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(doc, "`--"+f.Name+"`") {
			t.Errorf("--%s is not in docs/configuration.md", f.Name)
		}
	})
}
