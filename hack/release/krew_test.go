package main

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest
// (krew.googlecontainertools.github.com/v1alpha2) that `kubectl krew
// install --manifest=task.krew.yaml` reads.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Homepage         string `json:"homepage"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestTheKrewManifestInstallsThePlugin checks task.krew.yaml as krew reads
// it: for every platform, an https URI of this release's archive, the
// archive's sha256, and files that exist in the archive, the plugin's
// binary and its completion among them.
func TestTheKrewManifestInstallsThePlugin(t *testing.T) {
	t.Chdir("../..")
	const version = "v9.8.7"
	bin, out := t.TempDir(), t.TempDir()
	for _, p := range pluginPlatforms {
		dir := filepath.Join(bin, "kubectl-task_"+p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kubectl-task"), []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writePluginArchives(version, bin, out); err != nil {
		t.Fatal(err)
	}
	if err := writeKrewManifest(version, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "task.krew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("task.krew.yaml: %v", err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "task" {
		t.Errorf("apiVersion/kind/name = %s/%s/%s", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != version || m.Spec.ShortDescription == "" || !strings.HasPrefix(m.Spec.Homepage, "https://") {
		t.Errorf("spec: version %q (want %q), shortDescription %q, homepage %q", m.Spec.Version, version, m.Spec.ShortDescription, m.Spec.Homepage)
	}
	var platforms []string
	for _, p := range m.Spec.Platforms {
		platform := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		platforms = append(platforms, platform)
		archive := pluginArchive(version, platform)
		if !strings.HasPrefix(p.URI, "https://") || !strings.HasSuffix(p.URI, "/"+version+"/"+archive) {
			t.Errorf("%s: uri %q is not this release's %s", platform, p.URI, archive)
		}
		sum, err := sha256File(filepath.Join(out, archive))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p.Sha256) || p.Sha256 != sum {
			t.Errorf("%s: sha256 %q, the archive's is %s", platform, p.Sha256, sum)
		}
		entries := archiveEntries(t, filepath.Join(out, archive))
		var installed []string
		for _, f := range p.Files {
			if !slices.Contains(entries, f.From) {
				t.Errorf("%s: files.from %q is not in the archive (%v)", platform, f.From, entries)
			}
			installed = append(installed, f.From)
		}
		for _, want := range []string{p.Bin, "kubectl-task", "kubectl_complete-task", "LICENSE"} {
			if !slices.Contains(installed, want) {
				t.Errorf("%s: %q is not installed (files: %v)", platform, want, installed)
			}
		}
	}
	if !slices.Equal(platforms, pluginPlatforms) {
		t.Errorf("platforms %v, want %v", platforms, pluginPlatforms)
	}
}

func archiveEntries(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	return names
}
