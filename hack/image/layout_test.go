package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Dockerfile's final stage must build what layout.go defines: the same
// paths in the same order, user, entrypoint, labels and passwd.
func TestTheDockerfileBuildsTheImageLayoutGoDefines(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	final := text[strings.LastIndex(text, "\nFROM "):]
	// Continuation lines joined, comments dropped.
	final = strings.ReplaceAll(final, "\\\n", " ")
	var copies []string
	var user, entrypoint string
	labels := map[string]string{}
	env := map[string]string{}
	for _, line := range strings.Split(final, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "COPY":
			copies = append(copies, f[len(f)-1])
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))
		case "LABEL", "ENV":
			for _, m := range regexp.MustCompile(`([A-Za-z0-9_.]+)=("[^"]*"|\S+)`).FindAllStringSubmatch(line, -1) {
				if f[0] == "LABEL" {
					labels[m[1]] = strings.Trim(m[2], `"`)
				} else {
					env[m[1]] = m[2]
				}
			}
		}
	}
	if want := operatorPaths(); !slices.Equal(copies, want) {
		t.Errorf("the Dockerfile's final stage copies %v; layout.go's operatorEntries are %v", copies, want)
	}
	if user != operatorUser {
		t.Errorf("Dockerfile USER %q, layout.go %q", user, operatorUser)
	}
	want, _ := json.Marshal(operatorEntrypoint)
	if entrypoint != string(want) {
		t.Errorf("Dockerfile ENTRYPOINT %s, layout.go %s", entrypoint, want)
	}
	for k, v := range operatorLabels {
		if labels[k] != v {
			t.Errorf("Dockerfile label %s=%q, layout.go %q", k, labels[k], v)
		}
	}
	for _, k := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision"} {
		if _, ok := labels[k]; !ok {
			t.Errorf("Dockerfile sets no label %s", k)
		}
	}
	if env["SSL_CERT_FILE"] != "/etc/ssl/certs/ca-certificates.crt" {
		t.Errorf("Dockerfile ENV SSL_CERT_FILE=%q", env["SSL_CERT_FILE"])
	}
	for _, line := range []string{passwd, group} {
		if !strings.Contains(text, strings.TrimSuffix(line, "\n")+`\n`) {
			t.Errorf("the Dockerfile does not write %q", line)
		}
	}
}

// staticBinary builds a tiny static program to stand in for the manager.
func staticBinary(t *testing.T, dir, name string) string {
	t.Helper()
	src := filepath.Join(dir, name+".go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() { println(\""+name+"\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func TestTheSameInputsGiveTheSameArchiveAndDigest(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not a real bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := operatorInputs{Manager: staticBinary(t, dir, "manager"), Runner: staticBinary(t, dir, "runner"), CABundle: ca, Version: "v9.9.9", Revision: "abc"}
	var digests []string
	var archives [][]byte
	for i := range 2 {
		def, err := operatorImage(in)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "img"+string(rune('a'+i))+".tar")
		d, err := writeArchive(def, "ghcr.io/taskops/task-operator:v9.9.9", out)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		digests, archives = append(digests, d), append(archives, b)
	}
	if digests[0] != digests[1] || !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds differ: digests %v, archives equal %v", digests, bytes.Equal(archives[0], archives[1]))
	}

	// The archive is an OCI layout naming the image for containerd.
	files := untarMap(t, archives[0])
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != digests[0] ||
		index.Manifests[0].Annotations["io.containerd.image.name"] != "ghcr.io/taskops/task-operator:v9.9.9" ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v9.9.9" {
		t.Errorf("index.json %s", files["index.json"])
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Error("no oci-layout file")
	}
}

func TestAnImageRefusesADynamicallyLinkedBinary(t *testing.T) {
	// The test binary itself may or may not be static; /bin/sh never is on
	// a glibc machine.
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	if err := requireStatic("/bin/sh"); err == nil {
		b, _ := os.ReadFile("/bin/sh")
		if !bytes.Contains(b, []byte("ld-linux")) {
			t.Skip("/bin/sh is static here")
		}
		t.Error("requireStatic accepted /bin/sh, a dynamically linked binary")
	}
}

func untarMap(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}

func TestTheMultiPlatformArchiveIsOneIndexOfAnImagePerArchitecture(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("not a real bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := operatorInputs{Manager: staticBinary(t, dir, "manager"), Runner: staticBinary(t, dir, "runner"), CABundle: ca, Version: "v9.9.9"}
	def, err := operatorImage(in)
	if err != nil {
		t.Fatal(err)
	}
	var archives [][]byte
	for i := range 2 {
		out := filepath.Join(dir, fmt.Sprintf("multi%d.tar", i))
		if _, err := writeIndexArchive([]platformImage{{"amd64", def}, {"arm64", def}}, "ghcr.io/taskops/task-operator:v9.9.9", out); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the multi-platform archive differ")
	}
	files := untarMap(t, archives[0])
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	var top, nested struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" ||
		top.Manifests[0].Annotations["io.containerd.image.name"] != "ghcr.io/taskops/task-operator:v9.9.9" {
		t.Fatalf("index.json %s", files["index.json"])
	}
	blob := "blobs/sha256/" + strings.TrimPrefix(top.Manifests[0].Digest, "sha256:")
	if err := json.Unmarshal(files[blob], &nested); err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, m := range nested.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("image index %s", files[blob])
		}
		arches = append(arches, m.Platform.Architecture)
		var manifest struct {
			Config struct{ Digest string } `json:"config"`
		}
		_ = json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")], &manifest)
		var config struct{ Architecture string }
		_ = json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &config)
		if config.Architecture != m.Platform.Architecture {
			t.Errorf("the %s image's config says %q", m.Platform.Architecture, config.Architecture)
		}
	}
	if strings.Join(arches, ",") != "amd64,arm64" {
		t.Errorf("architectures %v, want amd64 and arm64", arches)
	}
}
