// Package docs tests the documentation as a reader meets it: every
// relative link of the Markdown files resolves to a file of the
// repository, and an anchor to a heading of that file.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const root = "../.."

var (
	// link matches [text](target) and ![alt](target), not inside code.
	link    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	fence   = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	span    = regexp.MustCompile("`[^`\n]*`")
	// inlineLink is [text](target) in a heading: its anchor keeps the text.
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

func markdownFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Fields(string(out))
}

func TestEveryRelativeLinkResolves(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 10 {
		t.Fatalf("found only %d Markdown files", len(files))
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(raw), ""), -1) {
			slug := Slug(m[1])
			for n := 0; ; n++ { // GitHub numbers repeated headings: x, x-1, x-2
				s := slug
				if n > 0 {
					s += "-" + strconv.Itoa(n)
				}
				if !a[s] {
					a[s] = true
					break
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := span.ReplaceAllString(fence.ReplaceAllString(string(raw), ""), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
					t.Errorf("%s: link to %s: no such file", f, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[anchor] {
				t.Errorf("%s: link to %s: %s has no heading with anchor #%s", f, target, resolved, anchor)
			}
		}
	}
}

// Slug is the anchor GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces as -.
func Slug(h string) string {
	h = span.ReplaceAllStringFunc(h, func(s string) string { return strings.Trim(s, "`") })
	h = inlineLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                  "quick-start",
		"CI pipelines: `kubectl task`": "ci-pipelines-kubectl-task",
		"Business schedules: holidays and daylight saving": "business-schedules-holidays-and-daylight-saving",
		"What `dist/` holds": "what-dist-holds",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
