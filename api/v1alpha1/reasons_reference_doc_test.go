package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/docgen"
)

// reasonSections are conditions.go's const blocks of Reasons, by the
// prefix of their names, in the page's order.
var reasonSections = []struct{ prefix, title, intro string }{
	{"Reason", "Condition reasons", "The reasons of a Task's (and a TaskQueue's) conditions. **Final** marks the reasons a run ends failed with (`Failed=True`, `FinalFailureReasons`)."},
	{"Attempt", "Attempt reasons", "Why an attempt failed: in `status.lastError`, in `history[].message` and in a `RetriesExhausted` message."},
	{"Event", "Event reasons", "The reasons of the Events the operator records on a Task (`kubectl describe task`, `kubectl get events --field-selector involvedObject.name=NAME`)."},
}

// TestReasonsReference: docs/reference/reasons.md lists every Reason
// constant with its doc comment (make docs writes it); a reason without a
// comment fails here.
func TestReasonsReference(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "conditions.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			name := v.Names[0].Name
			value, err := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			doc := strings.TrimSpace(v.Doc.Text())
			if doc == "" {
				t.Errorf("%s has no doc comment: say when the operator uses it", name)
				continue
			}
			doc = strings.TrimLeft(strings.TrimPrefix(doc, name), ":, \n")
			for _, s := range reasonSections {
				if !strings.HasPrefix(name, s.prefix) {
					continue
				}
				row := []string{docgen.Code(value), doc}
				if s.prefix == "Reason" {
					final := ""
					if slices.Contains(FinalFailureReasons, Reason(value)) {
						final = "**Final**"
					}
					row = []string{docgen.Code(value), final, doc}
				}
				rows[s.prefix] = append(rows[s.prefix], row)
			}
		}
	}
	var b strings.Builder
	b.WriteString(docgen.Header("the Reason constants of api/v1alpha1/conditions.go"))
	b.WriteString("# Reasons\n\n")
	b.WriteString("Reasons are stable CamelCase values: match on them, never on messages.\n")
	b.WriteString("What to do about each one: [troubleshooting.md](../troubleshooting.md).\n")
	for _, s := range reasonSections {
		b.WriteString("\n## " + s.title + "\n\n" + s.intro + "\n\n")
		head := []string{"reason", "what it means"}
		if s.prefix == "Reason" {
			head = []string{"reason", "final", "what it means"}
		}
		b.WriteString(docgen.Table(head, rows[s.prefix]))
	}
	docgen.Golden(t, "../../docs/reference/reasons.md", b.String())
}
