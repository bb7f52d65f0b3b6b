// Command image builds container images without a container engine: an OCI
// image archive (a tar of an OCI image layout) with one layer made from files
// on this machine, written with github.com/google/go-containerregistry.
//
//	go run ./hack/image operator -manager bin/linux/manager -runner bin/linux/task-runner -version v0.2.0 -out bin/image/task-operator.tar
//	go run ./hack/image operator -arch amd64,arm64 -bin-dir dist/bin -version v0.2.0 -out dist/task-operator-image.tar
//	go run ./hack/image busybox  -busybox /bin/busybox -out bin/image/busybox.tar
//	go run ./hack/image pause    -pause bin/image/pause -out bin/image/pause.tar
//	go run ./hack/image push     -archive bin/image/task-operator.tar -image registry.example.com/task-operator:v0.2.0
//
// The operator image's contents are the one list in layout.go, which the
// Dockerfile must match (layout_test.go compares them). Archives are
// reproducible: the same inputs give the same bytes and so the same digest
// (every timestamp is the Unix epoch, entries are sorted, owners are 0).
// Each archive's index names the image twice, as containerd's `ctr images
// import` reads it (io.containerd.image.name) and as the OCI spec says
// (org.opencontainers.image.ref.name), and the command prints the manifest
// digest on stdout.
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
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: image operator|busybox|pause|push [flags] (see the package doc)")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("out", "", "the OCI image archive to write")
	switch args[0] {
	case "operator":
		manager := fs.String("manager", "", "the static manager binary")
		runner := fs.String("runner", "", "the static task-runner binary")
		caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates bundle (Debian's ca-certificates)")
		version := fs.String("version", "", "the release version: the image's tag and version label")
		repo := fs.String("repository", "ghcr.io/taskops/task-operator", "the image repository")
		revision := fs.String("revision", "", "the source revision label (git commit), optional")
		binDir := fs.String("bin-dir", "", "multi-platform: a folder holding linux_<arch>/manager and linux_<arch>/task-runner for each of -arch (instead of -manager and -runner)")
		arches := fs.String("arch", "", "multi-platform: the architectures, comma-separated (amd64,arm64); the archive holds one image index")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *arches != "" {
			if *binDir == "" || *version == "" || *out == "" {
				return errors.New("operator -arch needs -bin-dir, -version and -out")
			}
			var images []platformImage
			for _, arch := range strings.Split(*arches, ",") {
				dir := filepath.Join(*binDir, "linux_"+arch)
				def, err := operatorImage(operatorInputs{Manager: filepath.Join(dir, "manager"), Runner: filepath.Join(dir, "task-runner"),
					CABundle: *caBundle, Version: *version, Revision: *revision})
				if err != nil {
					return err
				}
				images = append(images, platformImage{Arch: arch, Def: def})
			}
			return writeAndPrint(*repo+":"+*version, *out, func(ref, out string) (string, error) {
				return writeIndexArchive(images, ref, out)
			})
		}
		if *manager == "" || *runner == "" || *version == "" || *out == "" {
			return errors.New("operator needs -manager, -runner, -version and -out")
		}
		img, err := operatorImage(operatorInputs{Manager: *manager, Runner: *runner, CABundle: *caBundle, Version: *version, Revision: *revision})
		if err != nil {
			return err
		}
		return writeAndPrint(*repo+":"+*version, *out, one(img))
	case "busybox":
		return binaryImage(fs, args[1:], out, "busybox", "/bin/busybox", "a static busybox (Debian's busybox-static)",
			"docker.io/library/busybox:1.37", "the image name", busyboxImage)
	case "pause":
		return binaryImage(fs, args[1:], out, "pause", "", "a static pause binary (built from the Kubernetes module's build/pause/linux/pause.c)",
			"registry.k8s.io/pause:3.10", "the image name (containerd's sandbox_image)", pauseImage)
	case "push":
		archive := fs.String("archive", "", "an archive written by this command")
		ref := fs.String("image", "", "where to push it (registry/repository:tag)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *archive == "" || *ref == "" {
			return errors.New("push needs -archive and -image")
		}
		return push(*archive, *ref)
	default:
		return fmt.Errorf("unknown command %q (operator, busybox, pause, push)", args[0])
	}
}

// binaryImage is a verb that writes the image of one static binary, given
// by -NAME (default path), named -tag (default tag).
func binaryImage(fs *flag.FlagSet, args []string, out *string, name, path, pathUsage, tag, tagUsage string, build func(string) (imageDef, error)) error {
	bin := fs.String(name, path, pathUsage)
	ref := fs.String("tag", tag, tagUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *out == "" {
		return fmt.Errorf("%s needs -%s and -out", name, name)
	}
	img, err := build(*bin)
	if err != nil {
		return err
	}
	return writeAndPrint(*ref, *out, one(img))
}

// one writes the archive of a single image.
func one(img imageDef) func(ref, out string) (string, error) {
	return func(ref, out string) (string, error) { return writeArchive(img, ref, out) }
}

// writeAndPrint writes an archive with write (writeArchive of one image, or
// writeIndexArchive) and prints its digest.
func writeAndPrint(ref, out string, write func(ref, out string) (string, error)) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	digest, err := write(ref, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: wrote %s (%s)\n", out, ref)
	fmt.Println(strings.TrimSpace(digest))
	return nil
}
