package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/version"
)

// releaseRef matches what an install command pins: a release download, a
// pinned go install, the chart's --version.
var releaseRef = regexp.MustCompile(`releases/download/(v[0-9]+\.[0-9]+\.[0-9]+)|kubectl-task@(v[0-9]+\.[0-9]+\.[0-9]+)|charts/task-operator --version ([0-9]+\.[0-9]+\.[0-9]+)|kubectl-task_(v[0-9]+\.[0-9]+\.[0-9]+)_`)

// TestInstallCommandsNameThisRelease: the install commands users copy name
// the release this tree is (internal/version), so cutting a release that
// forgets one fails here.
func TestInstallCommandsNameThisRelease(t *testing.T) {
	for _, f := range []string{"README.md", "docs/install.md", "docs/kubectl-task.md", "charts/task-operator/README.md"} {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range releaseRef.FindAllStringSubmatch(string(raw), -1) {
			v := strings.Join(m[1:], "")
			if !strings.HasPrefix(v, "v") {
				v = "v" + v
			}
			if v != version.Release {
				t.Errorf("%s: %q names %s; the release is %s", f, m[0], v, version.Release)
			}
		}
	}
}
