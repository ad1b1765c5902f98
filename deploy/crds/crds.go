// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crds embeds the generated CustomResourceDefinitions of telesched so
// that tests and the sandbox install exactly the YAML that is committed.
package crds

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed *.yaml
var files embed.FS

// Load decodes every CRD in this directory, in file-name order.
func Load() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		defs, err := Decode(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, defs...)
	}
	if len(out) == 0 {
		return nil, errors.New("no CustomResourceDefinitions embedded")
	}
	return out, nil
}

// Decode decodes the CRDs of one YAML file (name is for errors): these,
// or another release's.
func Decode(name string, data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		if crd.Name == "" {
			continue // an empty document between separators
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: a %q, not a CustomResourceDefinition", name, crd.Kind)
		}
		out = append(out, crd)
	}
}
