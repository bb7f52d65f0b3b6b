// Package layers holds the check that keeps the pure deciders pure: they
// decide from values and link no network, API client or I/O layer of this
// module.
package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/testutil"
)

const module = "github.com/taskops/task-operator/"

// pure are the packages that decide; every decision about a Task is a
// pure function in one of them.
var pure = []string{"internal/notify", "internal/resultline", "internal/params", "internal/results", "internal/plan", "internal/status", "internal/admission", "internal/retry", "internal/scheduler", "internal/runs"}

// forbidden are what no package of this module that a pure package
// depends on may import. (The Kubernetes API types themselves link
// net/http through apimachinery; what counts is that none of this
// module's code on the way does.)
var forbidden = []string{
	"net/http",
	"sigs.k8s.io/controller-runtime/pkg/client",
	"k8s.io/client-go/kubernetes",
	module + "internal/reconciler",
	module + "internal/taskqueue",
	module + "internal/operator",
	module + "internal/fastpath",
	module + "internal/httprunner",
	module + "internal/notify/sender",
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestThePureDecidersLinkNoNetworkOrClientCode(t *testing.T) {
	for _, p := range pure {
		t.Run(p, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-json", "./"+p)
			cmd.Dir = testutil.RepoRoot()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list %s: %v", p, err)
			}
			dec := json.NewDecoder(strings.NewReader(string(out)))
			for {
				var dep pkg
				if err := dec.Decode(&dep); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(dep.ImportPath, module) {
					continue
				}
				for _, imp := range dep.Imports {
					for _, f := range forbidden {
						if imp == f {
							t.Errorf("%s depends on %s, which imports %s", p, strings.TrimPrefix(dep.ImportPath, module), imp)
						}
					}
				}
			}
		})
	}
}

// The operator (reconciler, controllers, manager) links no HTTP runner:
// the one line it reads from a runner is internal/resultline, which both
// import.
func TestTheOperatorLinksNoRunner(t *testing.T) {
	for _, p := range []string{"internal/reconciler", "cmd/manager"} {
		cmd := exec.Command("go", "list", "-deps", "./"+p)
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"internal/httprunner" || dep == module+"internal/notify/sender" {
				t.Errorf("%s depends on %s", p, dep)
			}
		}
	}
}

// The house's walls: cmd -> internal/operator -> the two controllers
// (internal/reconciler for Tasks, internal/taskqueue for TaskQueues) ->
// what they share (internal/fastpath, internal/guards, internal/index,
// internal/recorder) ->
// the pure deciders -> api. No package depends on one above it, and the
// controllers never on each other: what they share is handed to both.
func TestTheLayersPointOnlyDown(t *testing.T) {
	above := map[string][]string{
		"internal/reconciler": {"internal/taskqueue", "internal/operator"},
		"internal/taskqueue":  {"internal/reconciler", "internal/operator"},
		"internal/fastpath":   {"internal/reconciler", "internal/taskqueue", "internal/operator"},
		"internal/guards":     {"internal/reconciler", "internal/taskqueue", "internal/operator", "internal/fastpath"},
		"internal/index":      {"internal/reconciler", "internal/taskqueue", "internal/operator", "internal/fastpath"},
		"internal/recorder":   {"internal/reconciler", "internal/taskqueue", "internal/operator", "internal/fastpath"},
	}
	for p, banned := range above {
		cmd := exec.Command("go", "list", "-deps", "./"+p)
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p, err)
		}
		deps := strings.Fields(string(out))
		for _, b := range banned {
			for _, d := range deps {
				if d == module+b {
					t.Errorf("%s depends on %s, a layer above it", p, b)
				}
			}
		}
	}
}
