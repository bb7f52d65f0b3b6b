package chart

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/version"
)

// docs/install.md is what a platform team installs by: it must not name an
// image tag, a kind or object, or a flag default that the release does not
// have.

func installDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestInstallDocNamesOnlyThisReleasesImage(t *testing.T) {
	for _, m := range regexp.MustCompile(`ghcr\.io/taskops/task-operator:(\S+?)[\x60\s)]`).FindAllStringSubmatch(installDoc(t), -1) {
		if m[1] != version.Release {
			t.Errorf("docs/install.md names the image tag %s; the release is %s", m[1], version.Release)
		}
	}
}

func TestInstallDocsObjectsAreTheRenderedOnes(t *testing.T) {
	objs := kustomizeDefault(t)
	doc := installDoc(t)
	table := doc[strings.Index(doc, "## What gets installed"):]
	start := strings.Index(table, "|")
	table = table[start : start+strings.Index(table[start:], "\n\n")]
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.Contains(cells[2], "`") {
			continue
		}
		rows++
		kinds := strings.Split(regexp.MustCompile(`\s*\(.*\)`).ReplaceAllString(strings.TrimSpace(cells[1]), ""), " + ")
		for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[2], -1) {
			ns, n := "", name[1]
			if i := strings.Index(n, "/"); i >= 0 {
				ns, n = n[:i], n[i+1:]
			}
			found := false
			for _, kind := range kinds {
				kind = strings.TrimSpace(kind)
				if _, ok := objs[kind+"/"+ns+"/"+n]; ok {
					found = true
				}
			}
			if !found && !strings.Contains(cells[2], "pod-security") && name[1] != "restricted" {
				t.Errorf("docs/install.md lists %s %s, which install.yaml does not have", kinds, name[1])
			}
		}
	}
	if rows < 7 || rows > len(objs) {
		t.Errorf("read %d rows of the table of what gets installed; want one per kind", rows)
	}
}
