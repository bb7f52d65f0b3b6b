package v1alpha1

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/internal/docgen"
)

// crdPages are the generated API reference pages, one per CRD, made from
// the CRDs controller-gen writes from this package's types and markers:
// the fields with their types, defaults, limits and descriptions, the CEL
// rules with their messages, and the columns of `kubectl get`.
var crdPages = []struct{ crd, page string }{
	{"batch.taskops.io_tasks.yaml", "task.md"},
	{"batch.taskops.io_taskqueues.yaml", "taskqueue.md"},
	{"batch.taskops.io_taskcalendars.yaml", "taskcalendar.md"},
}

// TestAPIReference: docs/reference/{task,taskqueue,taskcalendar}.md are the
// CRDs' schemas (make docs writes them).
func TestAPIReference(t *testing.T) {
	for _, p := range crdPages {
		raw, err := os.ReadFile("../../config/crd/bases/" + p.crd)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		docgen.Golden(t, "../../docs/reference/"+p.page, crdPage(&crd))
	}
}

func crdPage(crd *apiextensionsv1.CustomResourceDefinition) string {
	v := crd.Spec.Versions[0]
	var b strings.Builder
	b.WriteString(docgen.Header("the " + crd.Spec.Names.Kind + " CRD (config/crd/bases, from api/v1alpha1's types and markers)"))
	fmt.Fprintf(&b, "# %s (`%s/%s`)\n\n", crd.Spec.Names.Kind, crd.Spec.Group, v.Name)
	scope := "namespaced"
	if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
		scope = "cluster-scoped"
	}
	fmt.Fprintf(&b, "%s\n\nA %s resource (`kubectl get %s`", oneLine(v.Schema.OpenAPIV3Schema.Description), scope, crd.Spec.Names.Plural)
	if len(crd.Spec.Names.ShortNames) > 0 {
		fmt.Fprintf(&b, ", short name%s %s", plural(len(crd.Spec.Names.ShortNames)), codes(crd.Spec.Names.ShortNames))
	}
	b.WriteString("). The guide to using it: [api.md](../api.md).\n")
	if len(v.AdditionalPrinterColumns) > 0 {
		b.WriteString("\n## Columns of `kubectl get`\n\n`-o wide` adds the columns of priority 1.\n\n")
		var rows [][]string
		for _, c := range v.AdditionalPrinterColumns {
			wide := ""
			if c.Priority > 0 {
				wide = "wide"
			}
			rows = append(rows, []string{strings.ToUpper(c.Name), docgen.Code(c.JSONPath), wide})
		}
		b.WriteString(docgen.Table([]string{"column", "from", "shown"}, rows))
	}
	root := v.Schema.OpenAPIV3Schema
	for _, top := range []string{"spec", "status"} {
		s, ok := root.Properties[top]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", top)
		if d := oneLine(s.Description); d != "" {
			b.WriteString(d + "\n\n")
		}
		var rows [][]string
		rules := fieldRows(top, s, slices.Contains(root.Required, top), &rows)
		b.WriteString(docgen.Table([]string{"field", "type", "default", "limits", "description"}, rows))
		if len(rules) > 0 {
			b.WriteString("\nChecked at admission (CEL), with the message a refused object gets:\n\n")
			b.WriteString(docgen.Table([]string{"on", "rule", "message"}, rules))
		}
	}
	return b.String()
}

// fieldRows appends a row for each field under s (path names s) and
// returns the CEL rules found on the way.
func fieldRows(path string, s apiextensionsv1.JSONSchemaProps, required bool, rows *[][]string) [][]string {
	rules := rulesOf(path, s)
	children, elem := s.Properties, ""
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0 {
		children, elem = s.Items.Schema.Properties, "[]"
		rules = append(rules, rulesOf(path+"[]", *s.Items.Schema)...)
	}
	for _, name := range slices.Sorted(maps.Keys(children)) {
		c := children[name]
		p := path + elem + "." + name
		req := slices.Contains(s.Required, name)
		if elem != "" {
			req = slices.Contains(s.Items.Schema.Required, name)
		}
		*rows = append(*rows, []string{docgen.Code(p), typeOf(c), defaultOf(c), limitsOf(c, req), oneLine(c.Description)})
		rules = append(rules, fieldRows(p, c, req, rows)...)
	}
	return rules
}

// rulesOf are the CEL rules on the schema at path itself.
func rulesOf(path string, s apiextensionsv1.JSONSchemaProps) [][]string {
	var rules [][]string
	for _, r := range s.XValidations {
		msg := r.Message
		if msg == "" && r.MessageExpression != "" {
			msg = "(computed: " + r.MessageExpression + ")"
		}
		rules = append(rules, []string{docgen.Code(path), docgen.Code(oneLine(r.Rule)), msg})
	}
	return rules
}

func typeOf(s apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int or string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeOf(*s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(*s.AdditionalProperties.Schema)
	case s.Type == "string" && s.Format != "":
		return "string (" + s.Format + ")"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

func defaultOf(s apiextensionsv1.JSONSchemaProps) string {
	if s.Default == nil {
		return ""
	}
	return docgen.Code(string(s.Default.Raw))
}

func limitsOf(s apiextensionsv1.JSONSchemaProps, required bool) string {
	var l []string
	if required {
		l = append(l, "required")
	}
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	if s.Minimum != nil {
		l = append(l, "≥ "+num(s.Minimum))
	}
	if s.Maximum != nil {
		l = append(l, "≤ "+num(s.Maximum))
	}
	if s.MinLength != nil {
		l = append(l, fmt.Sprintf("length ≥ %d", *s.MinLength))
	}
	if s.MaxLength != nil {
		l = append(l, fmt.Sprintf("length ≤ %d", *s.MaxLength))
	}
	if s.MinItems != nil {
		l = append(l, fmt.Sprintf("items ≥ %d", *s.MinItems))
	}
	if s.MaxItems != nil {
		l = append(l, fmt.Sprintf("items ≤ %d", *s.MaxItems))
	}
	if s.MaxProperties != nil {
		l = append(l, fmt.Sprintf("keys ≤ %d", *s.MaxProperties))
	}
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			var v any
			_ = json.Unmarshal(e.Raw, &v)
			vs = append(vs, docgen.Code(fmt.Sprint(v)))
		}
		l = append(l, "one of "+strings.Join(vs, ", "))
	}
	if s.Pattern != "" {
		l = append(l, "matches "+docgen.Code(s.Pattern))
	}
	if s.XListType != nil && *s.XListType != "atomic" {
		l = append(l, "list type "+*s.XListType)
	}
	return strings.Join(l, "; ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func codes(ss []string) string {
	var out []string
	for _, s := range ss {
		out = append(out, docgen.Code(s))
	}
	return strings.Join(out, ", ")
}
