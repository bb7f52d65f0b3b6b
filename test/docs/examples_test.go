package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
)

var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// TestTheREADMEsTasksDecode: every Task the README shows decodes strictly
// into the API's types, so a renamed or misspelt field fails here rather
// than on a reader's cluster.
func TestTheREADMEsTasksDecode(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range yamlBlock.FindAllStringSubmatch(string(raw), -1) {
		if !strings.Contains(m[1], "kind: Task\n") {
			continue
		}
		n++
		var task v1alpha1.Task
		if err := yaml.UnmarshalStrict([]byte(m[1]), &task); err != nil {
			t.Errorf("README.md: a Task that does not decode: %v\n%s", err, m[1])
		}
	}
	if n == 0 {
		t.Error("README.md shows no Task")
	}
}
