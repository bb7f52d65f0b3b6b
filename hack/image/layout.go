package main

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// entry is one path in an image's single layer.
type entry struct {
	Path string // absolute, inside the image
	Mode int64  // permission bits
	UID  int    // owner (0 unless set)
	// Exactly one of these: the file's bytes come from Source (a file on
	// this machine) or Data; Dir makes a directory; Link a symlink to it.
	Source string
	Data   []byte
	Dir    bool
	Link   string
}

// imageDef is everything one image holds: its layer and its configuration.
type imageDef struct {
	Entries    []entry
	Entrypoint []string
	User       string
	WorkingDir string
	Env        []string
	Labels     map[string]string
}

// The operator's release image. This is the one list of what goes into it:
// the Dockerfile builds the same image for users with Docker, and
// layout_test.go fails when the two drift apart (paths, user, entrypoint,
// labels).
var (
	// operatorUser is numeric so Kubernetes can check runAsNonRoot without
	// reading /etc/passwd; the files below name it too, for tools that do.
	operatorUser = "65532:65532"
	// operatorEntrypoint is the manager; http Tasks' pods run /task-runner
	// from the same image (the Deployment passes it as --runner-image).
	operatorEntrypoint = []string{"/manager"}
	// operatorLabels are the OCI labels both builds set; the version and
	// revision labels are added per build.
	operatorLabels = map[string]string{
		"org.opencontainers.image.title":       "task-operator",
		"org.opencontainers.image.description": "Kubernetes operator running Tasks (shell and http) as Jobs, with the http task runner",
		"org.opencontainers.image.source":      "https://github.com/taskops/task-operator",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
)

// passwd and group name the non-root user 65532 ("nonroot", as in
// distroless) and nothing else: there is no root login in the image.
const (
	passwd = "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "nonroot:x:65532:\n"
)

type operatorInputs struct {
	Manager, Runner, CABundle, Version, Revision string
}

func operatorImage(in operatorInputs) (imageDef, error) {
	for _, f := range []string{in.Manager, in.Runner, in.CABundle} {
		if _, err := os.Stat(f); err != nil {
			return imageDef{}, err
		}
	}
	for _, bin := range []string{in.Manager, in.Runner} {
		if err := requireStatic(bin); err != nil {
			return imageDef{}, err
		}
	}
	labels := map[string]string{"org.opencontainers.image.version": in.Version}
	if in.Revision != "" {
		labels["org.opencontainers.image.revision"] = in.Revision
	}
	for k, v := range operatorLabels {
		labels[k] = v
	}
	return imageDef{Entries: operatorEntries(in), Entrypoint: operatorEntrypoint, User: operatorUser, WorkingDir: "/", Labels: labels,
		// Go programs read the CA bundle from here without it, but other
		// tools a user adds on top might not.
		Env: []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}}, nil
}

// operatorEntries are the image's files, in the order of the Dockerfile's
// COPY lines.
func operatorEntries(in operatorInputs) []entry {
	return []entry{
		{Path: "/manager", Source: in.Manager, Mode: 0o755},
		{Path: "/task-runner", Source: in.Runner, Mode: 0o755},
		{Path: "/etc/ssl/certs/ca-certificates.crt", Source: in.CABundle, Mode: 0o644},
		{Path: "/etc/passwd", Data: []byte(passwd), Mode: 0o644},
		{Path: "/etc/group", Data: []byte(group), Mode: 0o644},
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: 65532},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
	}
}

// operatorPaths are the paths of operatorEntries.
func operatorPaths() []string {
	var out []string
	for _, e := range operatorEntries(operatorInputs{}) {
		out = append(out, e.Path)
	}
	return out
}

// busyboxImage is a shell image for the local cluster's real node, which
// cannot pull: /bin/busybox with a symlink per applet (so /bin/sh, sleep,
// cat, ... exist) and a world-writable /tmp. Pods run it as 65532.
func busyboxImage(busybox string) (imageDef, error) {
	if err := requireStatic(busybox); err != nil {
		return imageDef{}, err
	}
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return imageDef{}, fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	def := imageDef{
		Entrypoint: []string{"/bin/sh"},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     map[string]string{"org.opencontainers.image.description": "busybox from Debian's busybox-static, for the task-operator local cluster"},
		Entries: []entry{
			{Path: "/bin/busybox", Source: busybox, Mode: 0o755},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
			{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nnonroot:x:65532:65532:nonroot:/tmp:/bin/sh\n"), Mode: 0o644},
			{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n"), Mode: 0o644},
		},
	}
	seen := map[string]bool{"/bin/busybox": true}
	applets := strings.Fields(string(out))
	sort.Strings(applets)
	for _, a := range applets {
		p := "/" + strings.TrimPrefix(a, "/")
		if seen[p] {
			continue
		}
		seen[p] = true
		def.Entries = append(def.Entries, entry{Path: p, Link: "/bin/busybox", Mode: 0o777})
	}
	return def, nil
}

// pauseImage is the pod sandbox image the real node's containerd starts
// for every pod (its sandbox_image), built from Kubernetes' own pause.c.
func pauseImage(pause string) (imageDef, error) {
	if err := requireStatic(pause); err != nil {
		return imageDef{}, err
	}
	return imageDef{
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		WorkingDir: "/",
		Entries:    []entry{{Path: "/pause", Source: pause, Mode: 0o755}},
	}, nil
}

// requireStatic refuses a dynamically linked binary: the images have no
// libc, so such a binary would fail only when a pod starts.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0 (or -static)", path)
		}
	}
	return nil
}
