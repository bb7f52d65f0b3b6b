package v1alpha1_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// A Task is one etcd object: etcd refuses a write of more than 1.5 MiB,
// so a spec the schema lets grow without bound could make every status
// write of that Task fail (its result frozen), and one such Task costs the
// API server and every watcher its size on each write. These tests walk
// the generated CRD: every list, string and map in the spec has a bound,
// and the largest spec those bounds allow stays well under the limit.

// specBudget is the documented bound of a Task's spec (docs/api.md,
// "Bounds"): with the status the operator writes (conditions and history
// messages cut at 1 KiB) and the metadata the API server allows
// (annotations at most 256 KiB), a Task stays under etcd's 1.5 MiB.
const specBudget = 900 << 10

func taskSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/batch.taskops.io_tasks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// mapValueBound reads the bound a map's CEL rule puts on its values
// ("self[k].size() <= N"), since a schema has no marker for it.
var mapValueBound = regexp.MustCompile(`self\[k\]\.size\(\) <= (\d+)`)

// largest returns an upper bound of the JSON size of a value the schema
// admits, and records every unbounded place in it.
func largest(s apiextensionsv1.JSONSchemaProps, path string, unbounded *[]string) int64 {
	const number, key = 20, v1alpha1.LabelKeyMaxLength + 6
	if s.XIntOrString {
		return 64 // a quantity or a port
	}
	switch s.Type {
	case "string":
		switch {
		case s.MaxLength != nil:
			return *s.MaxLength + 2
		case len(s.Enum) > 0:
			n := 0
			for _, e := range s.Enum {
				n = max(n, len(e.Raw))
			}
			return int64(n)
		case s.Format == "date-time":
			return 40
		}
	case "integer", "number", "boolean":
		return number
	case "array":
		if s.MaxItems != nil {
			return 2 + *s.MaxItems*(largest(*s.Items.Schema, path+"[]", unbounded)+1)
		}
	case "object":
		n := int64(2)
		props := s.Properties
		if exactlyOne(s) {
			// A CEL rule admits exactly one of the optional members:
			// count the largest one, not all.
			props = map[string]apiextensionsv1.JSONSchemaProps{}
			var biggest string
			var most int64
			for name, p := range s.Properties {
				if name == "name" {
					props[name] = p
					continue
				}
				if size := largest(p, path+"."+name, unbounded); size > most {
					biggest, most = name, size
				}
			}
			props[biggest] = s.Properties[biggest]
		}
		for name, p := range props {
			n += int64(len(name)) + 4 + largest(p, path+"."+name, unbounded)
		}
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			return n
		}
		if s.MaxProperties == nil {
			break
		}
		value := s.AdditionalProperties.Schema
		var v int64
		if value.Type == "string" {
			v = -1
			for _, r := range s.XValidations {
				if m := mapValueBound.FindStringSubmatch(r.Rule); m != nil {
					v, _ = strconv.ParseInt(m[1], 10, 64)
				}
			}
			if v < 0 {
				*unbounded = append(*unbounded, path+"{} (no CEL bound on its values)")
				return n
			}
		} else {
			v = largest(*value, path+"{}", unbounded)
		}
		return n + *s.MaxProperties*(key+v+4)
	}
	*unbounded = append(*unbounded, path)
	return 0
}

func exactlyOne(s apiextensionsv1.JSONSchemaProps) bool {
	for _, r := range s.XValidations {
		if strings.Contains(r.Rule, "== 1") && strings.Contains(r.Message, "exactly one") {
			return true
		}
	}
	return false
}

func TestEveryListStringAndMapOfTheSpecIsBounded(t *testing.T) {
	var unbounded []string
	largest(taskSchema(t).Properties["spec"], "spec", &unbounded)
	for _, p := range unbounded {
		t.Errorf("%s has no bound in the CRD", p)
	}
}

func TestTheLargestSpecTheSchemaAdmitsIsUnderItsBudget(t *testing.T) {
	var unbounded []string
	spec := taskSchema(t).Properties["spec"]
	total := largest(spec, "spec", &unbounded)
	t.Logf("largest spec: %d KiB (budget %d KiB)", total>>10, specBudget>>10)
	for name, p := range spec.Properties {
		if size := largest(p, name, &unbounded); size > 32<<10 {
			t.Logf("  spec.%s: %d KiB", name, size>>10)
		}
	}
	if total > specBudget {
		t.Errorf("the schema admits a spec of %d KiB, over the documented %d KiB", total>>10, specBudget>>10)
	}
}
