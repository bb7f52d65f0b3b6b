// Package gitops runs the Argo CD health checks shipped in config/argocd
// the way Argo CD runs them: the Lua script, in gopher-lua (the engine Argo
// CD embeds), with the object as the global `obj`, returning a table with
// status and message. The e2e suite feeds it Tasks and TaskQueues the
// real operator wrote (test/e2e/gitops_test.go).
package gitops

import (
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"
)

// Health is what a health script returns.
type Health struct {
	Status  string
	Message string
}

// Check runs the health script of config/argocd/<script> (root is the
// repository) against obj, an object as JSON decodes it.
func Check(root, script string, obj map[string]any) (Health, error) {
	src, err := os.ReadFile(filepath.Join(root, "config", "argocd", script))
	if err != nil {
		return Health{}, err
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer l.Close()
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(string(src)); err != nil {
		return Health{}, fmt.Errorf("%s: %w", script, err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("%s returned %s, not a table", script, l.Get(-1).Type())
	}
	return Health{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}, nil
}

// toLua converts a JSON value to Lua as Argo CD does: objects and arrays
// to tables (arrays 1-based), numbers to numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	}
	return lua.LString(fmt.Sprint(v))
}
