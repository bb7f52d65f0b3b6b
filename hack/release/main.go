// Command release writes what `make release` ships into dist/, from
// binaries and an image archive the Makefile has already built:
//
//	go run ./hack/release -version v0.2.0 -bin-dir dist/bin -out dist
//
// It writes
//
//	install.yaml                 kustomize build config/default: CRDs, RBAC, namespace, Deployment, Service
//	crds.yaml                    kustomize build config/crd: the CRDs alone
//	kubectl-task_<v>_<os>_<arch>.tar.gz   the plugin and LICENSE, per platform
//	task.krew.yaml               the krew plugin manifest, with the archives' checksums
//	task-operator-<v>.tgz        the Helm chart, as `helm package` makes it
//	sbom/<binary>.spdx.json      the Go modules linked into each binary (SPDX 2.3)
//	checksums.txt                sha256 of every file above and of the image archive
//
// Every output is reproducible: the same commit gives the same bytes
// (archives at the Unix epoch, sorted, owned by 0; the SBOM dated by the
// commit, not the clock).
//
// `go run ./hack/release manifests -version V -out DIR` writes install.yaml
// and crds.yaml alone. `go run ./hack/release chart [dir]` writes the chart's generated
// templates (CRDs, RBAC, the PrometheusRule) from config/default into
// charts/task-operator/templates (or dir); `make manifests` runs it
// (chart.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// singleArtifacts are the verbs that write one artifact of the release.
var singleArtifacts = map[string]func(version, out string) error{
	"chart-archive": writeChartArchive,
	"manifests":     writeManifests,
}

func run(args []string) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	if verb == "chart" {
		dir := chartDir + "/templates"
		if len(args) > 1 {
			dir = args[1]
		}
		return writeChart(dir)
	}
	// One artifact alone: the chart (test/chart loads it), or install.yaml
	// and crds.yaml (the e2e install test).
	if write, ok := singleArtifacts[verb]; ok {
		fs := flag.NewFlagSet(verb, flag.ContinueOnError)
		version := fs.String("version", "", "the release version")
		out := fs.String("out", "dist", "where to write")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return write(*version, *out)
	}
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	version := fs.String("version", "", "the release version (vX.Y.Z), as internal/version says")
	binDir := fs.String("bin-dir", "dist/bin", "the built binaries: kubectl-task_<os>_<arch>/kubectl-task and linux_<arch>/{manager,task-runner}")
	out := fs.String("out", "dist", "where to write")
	date := fs.String("date", "", "the commit's time (RFC 3339), which dates the SBOMs; default: what the binaries recorded, else the Unix epoch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return errors.New("-version is required")
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"manifests", func() error { return writeManifests(*version, *out) }},
		{"plugin archives", func() error { return writePluginArchives(*version, *binDir, *out) }},
		{"krew manifest", func() error { return writeKrewManifest(*version, *out) }},
		{"chart archive", func() error { return writeChartArchive(*version, *out) }},
		{"SBOMs", func() error { return writeSBOMs(*version, *date, *binDir, filepath.Join(*out, "sbom")) }},
		{"checksums", func() error { return writeChecksums(*out) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	fmt.Fprintf(os.Stderr, "release: wrote %s for %s\n", strings.TrimSuffix(*out, "/"), *version)
	return nil
}
