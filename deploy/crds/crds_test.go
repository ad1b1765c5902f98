// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package crds

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestLoad(t *testing.T) {
	defs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if got, want := strings.Join(names, ","), "nodetelemetries.telemetry.telesched.io,powerbudgets.telemetry.telesched.io"; got != want {
		t.Errorf("embedded CRDs = %q, want %q", got, want)
	}
}

// TestEveryFieldDocumented walks the committed CRD schema: every property
// carries a description that starts with its JSON name, so `kubectl explain`
// teaches the whole API.
func TestEveryFieldDocumented(t *testing.T) {
	defs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		for _, v := range d.Spec.Versions {
			var problems []string
			root := d.Spec.Names.Kind
			walkProperties(v.Schema.OpenAPIV3Schema, root, func(path, name string, s *apiextensionsv1.JSONSchemaProps) {
				if path == root+".metadata" {
					// controller-gen writes the root metadata as a bare object;
					// the API server documents ObjectMeta itself.
					return
				}
				if s.Description == "" {
					problems = append(problems, path+": no description")
				} else if !strings.HasPrefix(strings.ToLower(s.Description), strings.ToLower(name)+" ") {
					problems = append(problems, path+": description does not start with "+name)
				}
			})
			sort.Strings(problems)
			for _, p := range problems {
				t.Errorf("%s %s: %s", d.Name, v.Name, p)
			}
		}
	}
}

func TestPrinterColumns(t *testing.T) {
	defs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range defs[0].Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			got = append(got, c.Name)
		}
	}
	if want := "CPU,MEMORY,TEMP,POWER,GPUS,SAMPLED"; strings.Join(got, ",") != want {
		t.Errorf("default printer columns = %s, want %s", strings.Join(got, ","), want)
	}
}

// TestPropertyOrderIsStable guards `make verify`: go-yaml, which writes the
// CRD, orders map keys comparing runs of digits as numbers, and its
// comparator is inconsistent for sibling names such as load1Milli and
// load15Milli, so such names come out in a different order on some runs.
// Sibling property names must sort the same by bytes and by digit runs.
func TestPropertyOrderIsStable(t *testing.T) {
	defs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, s *apiextensionsv1.JSONSchemaProps) {
		var names []string
		for name := range s.Properties {
			names = append(names, name)
		}
		byBytes := slices.Clone(names)
		slices.Sort(byBytes)
		byDigits := slices.Clone(names)
		slices.SortStableFunc(byDigits, naturalCompare)
		if !slices.Equal(byBytes, byDigits) {
			t.Errorf("%s: properties %v sort differently with digit runs as numbers (%v); rename them so they do not", path, byBytes, byDigits)
		}
	}
	for _, d := range defs {
		for _, v := range d.Spec.Versions {
			root := v.Schema.OpenAPIV3Schema
			check(d.Spec.Names.Kind, root)
			walkProperties(root, d.Spec.Names.Kind, func(path, _ string, s *apiextensionsv1.JSONSchemaProps) {
				check(path, s)
				if s.Items != nil && s.Items.Schema != nil {
					check(path+"[]", s.Items.Schema)
				}
			})
		}
	}
}

// naturalCompare orders strings comparing runs of digits as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func walkProperties(s *apiextensionsv1.JSONSchemaProps, path string, visit func(path, name string, s *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		child := path + "." + name
		visit(child, name, &p)
		walkProperties(&p, child, visit)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkProperties(s.Items.Schema, path+"[]", visit)
	}
}
