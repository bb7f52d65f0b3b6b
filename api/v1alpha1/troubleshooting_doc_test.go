package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// docs/troubleshooting.md has a section for every reason a user can meet:
// every Reason constant declared in this package (conditions, attempts,
// events) has a "### `Reason`" heading there.
func TestTroubleshootingHasASectionForEveryReason(t *testing.T) {
	doc, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || spec.Type == nil || len(spec.Values) != 1 {
			return true
		}
		if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "Reason" {
			return true
		}
		lit, ok := spec.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		reason, _ := strconv.Unquote(lit.Value)
		seen++
		if !strings.Contains(string(doc), "### `"+reason+"`") {
			t.Errorf("docs/troubleshooting.md has no section for %s (%s)", reason, spec.Names[0].Name)
		}
		return true
	})
	if seen < 40 {
		t.Errorf("read %d reasons from conditions.go; the parser missed them", seen)
	}
}
