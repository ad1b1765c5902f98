// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runbookPrograms are what a runbook's shell lines may start with: what an
// operator has at hand on a cluster or, for some runbooks, on the node.
var runbookPrograms = []string{"kubectl", "curl", "nvidia-smi", "ipmitool", "dmesg", "journalctl"}

// assignment is a shell line that sets a variable (NODE=node-a).
var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// runbookProblems returns what keeps book's alert sections from being
// followed: a Diagnosis with neither shell commands nor a link to another
// section, and a shell line that is no command (a placeholder left behind).
func runbookProblems(book string) []string {
	var problems []string
	sections := strings.Split("\n"+book, "\n## ")[1:]
	for _, sec := range sections {
		name, body, _ := strings.Cut(sec, "\n")
		name = strings.TrimSpace(name)
		if !strings.HasPrefix(name, "Telesched") {
			continue
		}
		_, diag, ok := strings.Cut(body, "**Diagnosis.**")
		if !ok {
			problems = append(problems, name+": no **Diagnosis.**")
			continue
		}
		diag, _, _ = strings.Cut(diag, "**Fix.**")
		if !strings.Contains(diag, "```sh\n") && !strings.Contains(diag, "](#") {
			problems = append(problems, name+": Diagnosis has no shell commands and names no other runbook")
		}
		inShell, continued := false, false
		for line := range strings.Lines(body) {
			line = strings.TrimSpace(line)
			switch {
			case line == "```sh":
				inShell, continued = true, false
				continue
			case strings.HasPrefix(line, "```"):
				inShell = false
				continue
			case !inShell, line == "", strings.HasPrefix(line, "#"):
				continue
			}
			if !continued && !assignment.MatchString(line) && !startsWithProgram(line) {
				problems = append(problems, name+": shell line "+strconv.Quote(line)+" is no command")
			}
			continued = strings.HasSuffix(line, `\`)
		}
	}
	return problems
}

func startsWithProgram(line string) bool {
	first, _, _ := strings.Cut(line, " ")
	for _, p := range runbookPrograms {
		if first == p {
			return true
		}
	}
	return false
}

func TestRunbookProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		book string
		want []string
	}{
		{
			name: "commands and a continuation",
			book: "## TeleschedA\n\n**Diagnosis.**\n\n```sh\nNODE=a\nAGENT=$(kubectl get pods \\\n  --field-selector x)\ncurl -s localhost:9102/metrics   # all\n```\n\n**Fix.** x\n",
		},
		{
			name: "a placeholder left in the commands",
			book: "## TeleschedA\n\n**Diagnosis.**\n\n```sh\nX\nkubectl top pods\n```\n\n**Fix.** x\n",
			want: []string{`TeleschedA: shell line "X" is no command`},
		},
		{
			name: "a diagnosis that points at another runbook",
			book: "## TeleschedA\n\n**Diagnosis.** As for [TeleschedB](#teleschedb).\n\n**Fix.** x\n",
		},
		{
			name: "a diagnosis with nothing to run",
			book: "## TeleschedA\n\n**Diagnosis.** Look around.\n\n**Fix.** x\n",
			want: []string{"TeleschedA: Diagnosis has no shell commands and names no other runbook"},
		},
		{
			name: "sections that are no alert are not read",
			book: "# Runbooks\n\n```sh\nX\n```\n\n## Notes\n\nnone\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, runbookProblems(tc.book)); diff != "" {
				t.Errorf("runbookProblems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunbooksCanBeFollowed: every runbook of docs/runbooks.md gives
// commands to diagnose its alert, and none is a placeholder.
func TestRunbooksCanBeFollowed(t *testing.T) {
	t.Parallel()
	book, err := os.ReadFile(filepath.Join(repoRoot(t), runbooks))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range runbookProblems(string(book)) {
		t.Errorf("%s: %s", runbooks, p)
	}
}
