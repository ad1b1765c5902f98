// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Images reads the images.json that make images-local (bin/build-images, hack/release/images) wrote
// into dir: each image's reference keyed by its repository's last element
// (telesched-agent, telesched-pause, ...), and the paths of their tarballs.
func Images(dir string) (refs map[string]string, tarballs []string, err error) {
	path := filepath.Join(dir, "images.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (make images-local writes it)", err)
	}
	var list []struct {
		Ref  string `json:"ref"`
		File string `json:"file"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	refs = map[string]string{}
	for _, im := range list {
		i := strings.LastIndex(im.Ref, ":")
		if i < 0 {
			return nil, nil, fmt.Errorf("%s: reference %q has no tag", path, im.Ref)
		}
		repo := im.Ref[:i]
		refs[repo[strings.LastIndex(repo, "/")+1:]] = im.Ref
		tarballs = append(tarballs, filepath.Join(dir, im.File))
	}
	return refs, tarballs, nil
}
