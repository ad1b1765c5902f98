// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImagesReadsTheManifest: images.json gives each image's reference by
// its repository's last element and the tarballs' paths; a reference
// without a tag is refused, naming it.
func TestImagesReadsTheManifest(t *testing.T) {
	dir := t.TempDir()
	manifest := `[{"ref":"ghcr.io/telesched/telesched-agent:v1","file":"telesched-agent.tar"},
		{"ref":"ghcr.io/telesched/telesched-pause:v1","file":"telesched-pause.tar"}]`
	if err := os.WriteFile(filepath.Join(dir, "images.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, tarballs, err := Images(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"telesched-agent": "ghcr.io/telesched/telesched-agent:v1", "telesched-pause": "ghcr.io/telesched/telesched-pause:v1"}, refs); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{filepath.Join(dir, "telesched-agent.tar"), filepath.Join(dir, "telesched-pause.tar")}, tarballs); diff != "" {
		t.Errorf("tarballs (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(filepath.Join(dir, "images.json"), []byte(`[{"ref":"telesched-agent","file":"a.tar"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Images(dir); err == nil || !strings.Contains(err.Error(), `"telesched-agent" has no tag`) {
		t.Errorf("a reference without a tag: got %v, want a refusal naming it", err)
	}
}
