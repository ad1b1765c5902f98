// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

var (
	number    = regexp.MustCompile(`\d+(?:\.\d+)?`)
	commit    = regexp.MustCompile(`\b[0-9a-f]{7}\b`)
	runAnchor = regexp.MustCompile(`\]\(#([^)]+)\)`)
)

// githubAnchor is the anchor GitHub gives a heading: lower case, letters,
// digits, '-' and '_' kept, spaces made '-', the rest dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// section is a heading's text, up to the next heading of its level or
// above, and the text of the outermost heading around it (itself at the
// top), where a run's build is often stated once for its parts.
type section struct{ text, outer string }

// sections maps each heading's anchor (GitHub's, "-1" and on for repeats)
// to its section. Lines in code blocks are no headings.
func sections(doc string) map[string]section {
	type heading struct {
		anchor string
		level  int
		line   int
	}
	lines := strings.Split(doc, "\n")
	var hs []heading
	seen := map[string]int{}
	inCode := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		a := githubAnchor(strings.TrimSpace(l[level:]))
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		hs = append(hs, heading{anchor: a, level: level, line: i})
	}
	text := make([]string, len(hs))
	for i, h := range hs {
		end := len(lines)
		for _, next := range hs[i+1:] {
			if next.level <= h.level {
				end = next.line
				break
			}
		}
		text[i] = strings.Join(lines[h.line:end], "\n")
	}
	out := map[string]section{}
	top := 0
	for i, h := range hs {
		if h.level <= hs[top].level {
			top = i
		}
		out[h.anchor] = section{text: text[i], outer: text[top]}
	}
	return out
}

// figuresNotInHistory reads the table under "## Current figures" (columns:
// benchmark, figure, command, build, run) and returns each row whose run
// link names no section under "## History", whose command is empty, or
// whose figure's numbers that section, or build's commits the section
// around it, do not hold.
func figuresNotInHistory(doc string) []string {
	_, rest, ok := strings.Cut(doc, "\n## Current figures\n")
	if !ok {
		return []string{`no "## Current figures"`}
	}
	table, history, ok := strings.Cut(rest, "\n## History\n")
	if !ok {
		return []string{`no "## History" after "## Current figures"`}
	}
	runs := sections(history)
	var problems []string
	rows := 0
	for l := range strings.Lines(table) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| ---") || strings.HasPrefix(l, "| benchmark |") {
			continue
		}
		rows++
		cells := strings.Split(strings.ReplaceAll(strings.Trim(l, "|"), `\|`, "\x00"), " | ")
		if len(cells) != 5 {
			problems = append(problems, "row "+l+": want 5 cells")
			continue
		}
		name := strings.TrimSpace(cells[0])
		if strings.TrimSpace(cells[2]) == "" {
			problems = append(problems, name+": no command")
		}
		m := runAnchor.FindStringSubmatch(cells[4])
		if m == nil {
			problems = append(problems, name+": no link to its run")
			continue
		}
		run, ok := runs[m[1]]
		if !ok {
			problems = append(problems, name+": no section #"+m[1]+" under History")
			continue
		}
		have := map[string]bool{}
		for _, n := range number.FindAllString(run.text, -1) {
			have[n] = true
		}
		for _, n := range number.FindAllString(cells[1], -1) {
			if !have[n] {
				problems = append(problems, name+": "+n+" is not in #"+m[1])
			}
		}
		for _, c := range commit.FindAllString(cells[3], -1) {
			if !strings.Contains(run.outer, c) {
				problems = append(problems, name+": build "+c+" is not in #"+m[1]+" or the section around it")
			}
		}
	}
	if rows == 0 {
		problems = append(problems, "no rows under \"## Current figures\"")
	}
	return problems
}

func TestFiguresNotInHistory(t *testing.T) {
	t.Parallel()
	const head = "# Benchmarks\n\n## Current figures\n\n| benchmark | current figure | command | build, machine | run |\n| --- | --- | --- | --- | --- |\n"
	const history = "\n## History\n\n### Run A (2026-11-27)\n\nb67fb63: ratio **1.13**, 8.73 ms\n\n```console\n# not a heading\n```\n\n### Run B\n\nratio 0.96\n"
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "figures and build as in the run",
			doc:  head + "| bench `a|b` | ratio **1.13** (8.73 ms) | `make x WORKLOADS='a\\|b'` | b67fb63 | [A](#run-a-2026-11-27) |\n" + history,
		},
		{
			name: "a figure the run does not hold",
			doc:  head + "| bench | ratio 1.14 | `make x` | b67fb63 | [A](#run-a-2026-11-27) |\n" + history,
			want: []string{"bench: 1.14 is not in #run-a-2026-11-27"},
		},
		{
			name: "a figure from another run",
			doc:  head + "| bench | ratio 0.96 | `make x` | b67fb63 | [A](#run-a-2026-11-27) |\n" + history,
			want: []string{"bench: 0.96 is not in #run-a-2026-11-27"},
		},
		{
			name: "a build the run does not name",
			doc:  head + "| bench | ratio 0.96 | `make x` | 1234abc | [B](#run-b) |\n" + history,
			want: []string{"bench: build 1234abc is not in #run-b or the section around it"},
		},
		{
			name: "a build stated around the run",
			doc:  head + "| bench | ratio 0.75 | `make x` | b67fb63 | [A1](#part-1) |\n" + "\n## History\n\n### Run A\n\nBuild b67fb63.\n\n#### Part 1\n\nratio 0.75\n\n### Run B\n\nratio 0.96\n",
		},
		{
			name: "a link to no run",
			doc:  head + "| bench | ratio 0.96 | `make x` | – | [C](#run-c) |\n" + history,
			want: []string{"bench: no section #run-c under History"},
		},
		{
			name: "no command",
			doc:  head + "| bench | ratio 0.96 |  | – | [B](#run-b) |\n" + history,
			want: []string{"bench: no command"},
		},
		{
			name: "no history",
			doc:  head + "| bench | ratio 0.96 | `make x` | – | [B](#run-b) |\n",
			want: []string{`no "## History" after "## Current figures"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, figuresNotInHistory(tc.doc)); diff != "" {
				t.Errorf("figuresNotInHistory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBenchmarksCurrentFiguresAreInHistory: docs/benchmarks.md leads with
// one table of current figures, and each figure and build is that of the
// run it links to, below.
func TestBenchmarksCurrentFiguresAreInHistory(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range figuresNotInHistory(string(doc)) {
		t.Errorf("docs/benchmarks.md: %s", p)
	}
}
