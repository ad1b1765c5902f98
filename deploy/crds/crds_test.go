package crds

import (
	"sort"
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
	if got, want := strings.Join(names, ","), "nodetelemetries.telemetry.telesched.io"; got != want {
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
