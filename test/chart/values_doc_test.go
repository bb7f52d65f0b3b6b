package chart

import (
	"os"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/taskops/task-operator/internal/docgen"
)

// TestTheChartREADMEIsItsValues: charts/task-operator/README.md's values
// table is values.yaml, each key with its default and the comment above
// it (make docs writes it); values.yaml stays the one home of what a key
// does.
func TestTheChartREADMEIsItsValues(t *testing.T) {
	raw, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	valueRows("", doc.Content[0], "", &rows)
	for _, r := range rows {
		if r[2] == "" {
			t.Errorf("values.yaml: %s has no comment saying what it does", r[0])
		}
	}
	c := load(t)
	var b strings.Builder
	b.WriteString(docgen.Header("charts/task-operator/values.yaml"))
	b.WriteString("# task-operator chart\n\n")
	b.WriteString(c.Metadata.Description + "\n\n")
	b.WriteString("```sh\nhelm install task-operator oci://ghcr.io/taskops/charts/task-operator \\\n")
	b.WriteString("  --version " + c.Metadata.Version + " --namespace task-operator-system --create-namespace\n```\n\n")
	b.WriteString("What it installs, upgrading and uninstalling: [docs/install.md](../../docs/install.md).\n")
	b.WriteString("`values.schema.json` checks the values: a key the chart does not read is\n")
	b.WriteString("refused, not ignored. Requires Kubernetes " + c.Metadata.KubeVersion + ".\n\n")
	b.WriteString("## Values\n\n")
	b.WriteString(docgen.Table([]string{"key", "default", "description"}, rows))
	docgen.Golden(t, chartDir+"/README.md", b.String())
}

// valueRows appends a row per leaf of a mapping: a scalar, a list, or a
// mapping that holds Kubernetes fields rather than the chart's own keys
// (resources, affinity, ...: the chart passes them through as they are).
func valueRows(prefix string, m *yamlv3.Node, inherited string, rows *[][]string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		comment := commentText(k.HeadComment)
		if v.Kind == yamlv3.MappingNode && len(v.Content) > 0 && !passedThrough[key] {
			valueRows(key+".", v, comment, rows)
			continue
		}
		if comment == "" && i == 0 {
			comment = inherited // the block's comment describes its first key
		}
		def, err := yamlv3.Marshal(v)
		if err != nil {
			panic(err)
		}
		*rows = append(*rows, []string{docgen.Code(key), docgen.Code(flowYAML(v, strings.TrimSpace(string(def)))), comment})
	}
}

// passedThrough are the values that are Kubernetes objects the templates
// copy into the Deployment as they are.
var passedThrough = map[string]bool{"resources": true, "affinity": true, "networkPolicy.metricsFrom": true}

func flowYAML(v *yamlv3.Node, block string) string {
	if v.Kind == yamlv3.ScalarNode {
		return block
	}
	c := *v
	setFlow(&c)
	out, err := yamlv3.Marshal(&c)
	if err != nil {
		return block
	}
	return strings.TrimSpace(string(out))
}

func setFlow(n *yamlv3.Node) {
	n.Style = yamlv3.FlowStyle
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		setFlow(c)
	}
}

func commentText(c string) string {
	var lines []string
	for _, l := range strings.Split(c, "\n") {
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")))
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}
