package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/taskops/task-operator/internal/version"
)

// TestTheChartArchiveIsTheChart: Helm loads the release's chart archive as
// the same chart as charts/task-operator, and the archive is the same bytes
// each time it is made.
func TestTheChartArchiveIsTheChart(t *testing.T) {
	t.Chdir("../..")
	out := t.TempDir()
	if err := writeChartArchive(version.Release, out); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, chartArchive(version.Release))
	packaged, err := loader.Load(path)
	if err != nil {
		t.Fatalf("helm cannot load %s: %v", path, err)
	}
	dir, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if "v"+packaged.Metadata.Version != version.Release {
		t.Errorf("the archive holds chart version %s; the release is %s", packaged.Metadata.Version, version.Release)
	}
	if d := cmp.Diff(dir.Metadata, packaged.Metadata); d != "" {
		t.Errorf("Chart.yaml differs (-dir +archive):\n%s", d)
	}
	var inDir, inArchive []string
	for _, f := range dir.Raw {
		inDir = append(inDir, f.Name)
	}
	for _, f := range packaged.Raw {
		inArchive = append(inArchive, f.Name)
	}
	if d := cmp.Diff(inDir, inArchive); d != "" {
		t.Errorf("files differ (-dir +archive):\n%s", d)
	}
	if packaged.Schema == nil {
		t.Error("the archive has no values.schema.json")
	}

	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeChartArchive(version.Release, out); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two archives of the same chart differ")
	}
}
