// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dockerImage is what a Dockerfile fixes of the image it builds: the
// final stage's FROM, COPY destinations, USER, EXPOSE, ENTRYPOINT and
// ENV, and the build stage's CGO_ENABLED and go build flags and package.
type dockerImage struct {
	From       string
	Copies     []string
	User       string
	Expose     []string
	Entrypoint []string
	Env        []string
	CGO        string
	GoBuild    string
	Package    string
}

// parseDockerfile reads the instructions of a Dockerfile: comments
// dropped, continued lines joined. Only what dockerImage holds is read.
func parseDockerfile(t *testing.T, text string) dockerImage {
	t.Helper()
	var lines []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		lines = append(lines, cur+trimmed)
		cur = ""
	}
	var stages [][]string
	for _, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], l)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: want a build stage and a final stage, found %d stages", len(stages))
	}
	var d dockerImage
	for _, l := range stages[len(stages)-2] {
		fields := strings.Fields(l)
		for _, f := range fields {
			if strings.HasPrefix(f, "CGO_ENABLED=") {
				d.CGO = strings.TrimPrefix(f, "CGO_ENABLED=")
			}
		}
		if i := strings.Index(l, "go build "); i >= 0 {
			cmd := strings.Fields(l[i:])
			d.Package = cmd[len(cmd)-1]
			d.GoBuild = strings.Join(cmd[:len(cmd)-3], " ") // up to "-o OUT PKG"
		}
	}
	for _, l := range stages[len(stages)-1] {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		fields := strings.Fields(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			for _, f := range fields {
				if !strings.HasPrefix(f, "--") {
					d.From = f
					break
				}
			}
		case "COPY":
			d.Copies = append(d.Copies, fields[len(fields)-1])
		case "USER":
			d.User = rest
		case "EXPOSE":
			d.Expose = append(d.Expose, fields...)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.Entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec (JSON) form: %v", rest, err)
			}
		case "ENV":
			d.Env = append(d.Env, fields...)
		}
	}
	return d
}

// recipeImage is what the recipe says of the same things, with the
// go build flags GoBuild uses.
func recipeImage(r Recipe) dockerImage {
	d := dockerImage{
		From:       r.Base.Name,
		User:       r.User,
		Expose:     r.Expose,
		Entrypoint: r.Entrypoint,
		Env:        r.Env,
		GoBuild:    `go build -trimpath -buildvcs=false -ldflags "-s -w -X ` + VersionVar + `=${VERSION}"`,
	}
	for _, c := range r.Copies {
		d.Copies = append(d.Copies, c.Dest)
		d.Package = c.Package
		d.CGO = "0"
		if c.CGO {
			d.CGO = "1"
		}
	}
	return d
}

// TestRecipesMatchDockerfiles holds the Go recipes equal to the
// Dockerfiles, so the images hack/images builds are the ones `make
// images` would; the mutated cases show that a change on either side
// fails it.
func TestRecipesMatchDockerfiles(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(moduleRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	agent, scheduler := read("Dockerfile.agent"), read("Dockerfile.scheduler")
	tests := []struct {
		name       string
		dockerfile string
		recipe     Recipe
		wantDiff   bool
	}{
		{name: "a changed USER in the Dockerfile is caught", dockerfile: strings.Replace(agent, "USER 48811:48811", "USER 1000:1000", 1), recipe: Agent, wantDiff: true},
		{name: "a changed base in the Dockerfile is caught", dockerfile: strings.Replace(scheduler, "static-debian12:nonroot", "base-debian12:nonroot", 1), recipe: Scheduler, wantDiff: true},
		{name: "cgo on in the scheduler's Dockerfile is caught", dockerfile: strings.Replace(scheduler, "CGO_ENABLED=0", "CGO_ENABLED=1", 1), recipe: Scheduler, wantDiff: true},
		{name: "an ENV added to the Dockerfile is caught", dockerfile: scheduler + "ENV GODEBUG=x509sha1=1\n", recipe: Scheduler, wantDiff: true},
	}
	// Every Dockerfile of the checkout has its recipe in All, by name
	// (Dockerfile.X builds telesched-X): an image `make images` builds
	// that `make images-local` does not is caught here.
	files, err := filepath.Glob(filepath.Join(moduleRoot, "Dockerfile.*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Dockerfile.* at the top of the checkout (%v)", err)
	}
	for _, f := range files {
		name := "telesched-" + strings.TrimPrefix(filepath.Base(f), "Dockerfile.")
		i := slices.IndexFunc(All, func(r Recipe) bool { return r.Name == name })
		if i < 0 {
			t.Errorf("%s has no recipe named %s in All (internal/ociimage/recipes.go)", filepath.Base(f), name)
			continue
		}
		tests = append(tests, struct {
			name       string
			dockerfile string
			recipe     Recipe
			wantDiff   bool
		}{name: filepath.Base(f), dockerfile: read(filepath.Base(f)), recipe: All[i]})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			diff := cmp.Diff(parseDockerfile(t, tc.dockerfile), recipeImage(tc.recipe))
			switch {
			case tc.wantDiff && diff == "":
				t.Error("the Dockerfile and the recipe differ, but the comparison found no difference")
			case !tc.wantDiff && diff != "":
				t.Errorf("Dockerfile and recipe differ (-Dockerfile +recipe):\n%s", diff)
			}
		})
	}
}
