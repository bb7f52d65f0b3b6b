package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// pluginPlatforms are the kubectl-task builds a release ships.
var pluginPlatforms = []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"}

// epoch dates every archive entry, so archives are reproducible.
var epoch = time.Unix(0, 0).UTC()

func pluginArchive(version, platform string) string {
	return fmt.Sprintf("kubectl-task_%s_%s.tar.gz", version, platform)
}

// writePluginArchives writes one tar.gz per platform holding kubectl-task,
// kubectl_complete-task (kubectl's completion of the plugin) and LICENSE.
func writePluginArchives(version, binDir, out string) error {
	license, err := os.ReadFile("LICENSE")
	if err != nil {
		return err
	}
	completion, err := os.ReadFile("cmd/kubectl-task/kubectl_complete-task")
	if err != nil {
		return err
	}
	for _, p := range pluginPlatforms {
		bin, err := os.ReadFile(filepath.Join(binDir, "kubectl-task_"+p, "kubectl-task"))
		if err != nil {
			return err
		}
		data, err := targz([]file{{"LICENSE", 0o644, license}, {"kubectl-task", 0o755, bin}, {"kubectl_complete-task", 0o755, completion}})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, pluginArchive(version, p)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

type file struct {
	name string
	mode int64
	data []byte
}

// targz is a gzipped tar of files, with nothing that depends on when or
// where it was made.
func targz(files []file) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sha256File(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// writeKrewManifest writes the krew plugin manifest for the archives,
// downloaded from the release of this version.
func writeKrewManifest(version, out string) error {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: task
spec:
  version: %s
  homepage: https://github.com/taskops/task-operator
  shortDescription: Run, wait for and inspect task-operator Tasks
  description: |
    Creates, triggers, cancels and waits for the Tasks of task-operator
    (batch.taskops.io) from CI pipelines, with exit codes CI can act on:
    0 succeeded, 1 failed, 2 timed out, 3 usage or API error, 4 cancelled.
  platforms:
`, version)
	for _, p := range pluginPlatforms {
		os, arch, _ := strings.Cut(p, "_")
		sum, err := sha256File(filepath.Join(out, pluginArchive(version, p)))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, `  - selector:
      matchLabels:
        os: %s
        arch: %s
    uri: https://github.com/taskops/task-operator/releases/download/%s/%s
    sha256: %s
    bin: kubectl-task
    files:
    - from: kubectl-task
      to: .
    - from: kubectl_complete-task
      to: .
    - from: LICENSE
      to: .
`, os, arch, version, pluginArchive(version, p), sum)
	}
	return writeFile(filepath.Join(out, "task.krew.yaml"), []byte(b.String()))
}

// writeChecksums writes checksums.txt (sha256sum's format) of every file
// in out except the binaries' folder, sorted by name.
func writeChecksums(out string) error {
	var names []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		switch {
		case d.IsDir() && rel == "bin":
			return filepath.SkipDir
		case d.IsDir() || rel == "checksums.txt":
			return nil
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := sha256File(filepath.Join(out, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return writeFile(filepath.Join(out, "checksums.txt"), []byte(b.String()))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
