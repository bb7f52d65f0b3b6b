package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// sbomBinaries are the binaries whose modules the release lists: the
// manager and runner (both in the image) and the plugin, as built for
// linux/amd64 (the other platforms link the same modules).
var sbomBinaries = map[string]string{
	"manager":      "linux_amd64/manager",
	"task-runner":  "linux_amd64/task-runner",
	"kubectl-task": "kubectl-task_linux_amd64/kubectl-task",
}

// The parts of SPDX 2.3 JSON an SBOM of a Go binary needs.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string       `json:"SPDXID"`
	Name             string       `json:"name"`
	VersionInfo      string       `json:"versionInfo"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	Checksums        []spdxSum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string       `json:"primaryPackagePurpose,omitempty"`
	Supplier         string       `json:"supplier,omitempty"`
}

type spdxSum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func spdxID(s string) string { return "SPDXRef-Package-" + spdxIDUnsafe.ReplaceAllString(s, "-") }

func purl(path, version string) spdxExtRef {
	return spdxExtRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + version}
}

// writeSBOMs writes an SPDX document per binary, from the module list the
// Go linker stored in it (what `go version -m` prints).
func writeSBOMs(version, date, binDir, out string) error {
	for name, rel := range sbomBinaries {
		path := filepath.Join(binDir, rel)
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		// The commit's time, so two builds of one commit are the same
		// document.
		created := "1970-01-01T00:00:00Z"
		for _, s := range info.Settings {
			if s.Key == "vcs.time" {
				created = s.Value
			}
		}
		if date != "" {
			t, err := time.Parse(time.RFC3339, date)
			if err != nil {
				return fmt.Errorf("-date: %w", err)
			}
			created = t.UTC().Format(time.RFC3339)
		}
		main := spdxPackage{SPDXID: spdxID(name), Name: name, VersionInfo: version, DownloadLocation: "https://github.com/taskops/task-operator",
			Checksums:      []spdxSum{{Algorithm: "SHA256", Value: hex.EncodeToString(sum[:])}},
			ExternalRefs:   []spdxExtRef{purl(info.Main.Path, version)},
			PrimaryPurpose: "APPLICATION", Supplier: "Organization: task-operator"}
		doc := spdxDoc{SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name + "-" + version,
			DocumentNamespace: fmt.Sprintf("https://github.com/taskops/task-operator/releases/%s/sbom/%s-%s", version, name, hex.EncodeToString(sum[:8])),
			CreationInfo:      spdxCreation{Created: created, Creators: []string{"Tool: task-operator-hack-release", "Organization: task-operator"}},
			Packages:          []spdxPackage{main},
			Relationships:     []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: main.SPDXID}},
		}
		goVersion := strings.TrimPrefix(info.GoVersion, "go")
		std := spdxPackage{SPDXID: spdxID("stdlib"), Name: "stdlib", VersionInfo: goVersion, DownloadLocation: "https://go.dev/dl/",
			ExternalRefs: []spdxExtRef{purl("stdlib", "v"+goVersion)}, PrimaryPurpose: "LIBRARY"}
		doc.Packages = append(doc.Packages, std)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: std.SPDXID})
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			p := spdxPackage{SPDXID: spdxID(d.Path + "-" + d.Version), Name: d.Path, VersionInfo: d.Version,
				DownloadLocation: "https://proxy.golang.org/" + strings.ToLower(d.Path) + "/@v/" + d.Version + ".zip",
				ExternalRefs:     []spdxExtRef{purl(d.Path, d.Version)}, PrimaryPurpose: "LIBRARY"}
			doc.Packages = append(doc.Packages, p)
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: main.SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID})
		}
		raw, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(out, name+".spdx.json"), append(raw, '\n')); err != nil {
			return err
		}
	}
	return nil
}
