package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// controllers are the packages that hold a controller: they take the speed
// shortcuts through internal/fastpath's hooks, which are no-ops when the
// shortcuts are off, and never ask whether they are on.
var controllers = []string{"internal/reconciler", "internal/taskqueue"}

// taskController is the Task controller's package: every function in it
// fits on a screen, so a newcomer reads a pass stage by stage.
const taskController = "internal/reconciler"

// maxFunctionLines bounds a function of the Task controller, its
// signature and closing brace included.
const maxFunctionLines = 60

// The benchmark harness (test/bench) is read when a figure surprises:
// its functions fit in two screens.
const (
	benchHarness          = "test/bench"
	maxBenchFunctionLines = 120
)

func TestNoControllerBranchesOnTheShortcutsSwitch(t *testing.T) {
	for _, dir := range controllers {
		eachFunc(t, dir, func(fset *token.FileSet, file string, fn *ast.FuncDecl) {
			ast.Inspect(fn, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "On" {
					if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Shortcuts" {
						t.Errorf("%s: %s asks Shortcuts.On(); call a fastpath hook (a no-op when off) instead", fset.Position(sel.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		})
	}
}

func TestTheTaskControllersFunctionsFitOnAScreen(t *testing.T) {
	eachFunc(t, taskController, func(fset *token.FileSet, file string, fn *ast.FuncDecl) {
		if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFunctionLines {
			t.Errorf("%s: %s is %d lines (at most %d): split it into named steps", file, fn.Name.Name, n, maxFunctionLines)
		}
	})
}

func TestTheBenchmarkHarnessFunctionsFitInTwoScreens(t *testing.T) {
	eachFunc(t, benchHarness, func(fset *token.FileSet, file string, fn *ast.FuncDecl) {
		if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxBenchFunctionLines {
			t.Errorf("%s: %s is %d lines (at most %d): split it by concern", file, fn.Name.Name, n, maxBenchFunctionLines)
		}
	})
}

// eachFunc calls f for every function declared in the package in dir
// (relative to the module's root), tests left out.
func eachFunc(t *testing.T, dir string, f func(fset *token.FileSet, file string, fn *ast.FuncDecl)) {
	t.Helper()
	root := filepath.Join("..", "..", dir)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(root, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				f(fset, filepath.Join(dir, name), fn)
			}
		}
	}
}
