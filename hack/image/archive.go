package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every timestamp in an image, so the same inputs give the same
// digest (the role SOURCE_DATE_EPOCH=0 plays in other builds).
var epoch = time.Unix(0, 0).UTC()

// layerTar is the image's one layer: its entries plus every parent folder,
// sorted, owned by 0:0, all at the epoch.
func layerTar(entries []entry) ([]byte, error) {
	all := map[string]entry{}
	for _, e := range entries {
		if !path.IsAbs(e.Path) {
			return nil, fmt.Errorf("image path %q is not absolute", e.Path)
		}
		all[e.Path] = e
		for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{Path: d, Dir: true, Mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := all[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.Mode, Uid: e.UID, Gid: e.UID, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		case e.Source != "":
			b, err := os.ReadFile(e.Source)
			if err != nil {
				return nil, err
			}
			data = b
		default:
			data = e.Data
		}
		if h.Typeflag == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// build turns a definition into an OCI image for linux/arch.
func build(def imageDef, arch string) (v1.Image, error) {
	layerBytes, err := layerTar(def.Entries)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image", Comment: "one layer made from files, without a container engine"},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: def.Entrypoint,
		User:       def.User,
		WorkingDir: def.WorkingDir,
		Env:        def.Env,
		Labels:     def.Labels,
	}
	return mutate.ConfigFile(img, cf)
}

// writeArchive writes the image as an OCI image archive: the files of an OCI
// image layout, tarred the same way as the layer. It returns the manifest
// digest.
func writeArchive(def imageDef, ref, out string) (string, error) {
	img, err := build(def, runtime.GOARCH)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return digest.String(), writeLayout(ref, out, func(p layout.Path, named layout.Option) error {
		return p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}), named)
	})
}

// platformImage is the image of one architecture in a multi-platform
// archive.
type platformImage struct {
	Arch string
	Def  imageDef
}

// writeIndexArchive writes one image index holding an image per
// architecture, as an OCI image archive (the release's multi-platform
// image). It returns the index digest.
func writeIndexArchive(images []platformImage, ref, out string) (string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, pi := range images {
		img, err := build(pi.Def, pi.Arch)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: pi.Arch}}})
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return digest.String(), writeLayout(ref, out, func(p layout.Path, named layout.Option) error {
		return p.AppendIndex(idx, named)
	})
}

// writeLayout writes an OCI image layout that add fills, naming what add
// appends ref, and tars it into out.
func writeLayout(ref, out string, add func(p layout.Path, named layout.Option) error) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	named := layout.WithAnnotations(map[string]string{
		// containerd's `ctr images import` names the image from this.
		"io.containerd.image.name": tag.String(),
		// The OCI image layout's own name: the tag alone.
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})
	if err := add(p, named); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// tarDir writes the files under dir into the tar out, deterministically.
func tarDir(dir, out string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range files {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		if st.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if err := copyFrom(tw, p); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// push uploads the image of an archive written by writeArchive, with the
// credentials of the user's Docker config (~/.docker/config.json).
func push(archive, ref string) error {
	dst, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "image-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := untar(archive, dir); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 {
		return fmt.Errorf("%s holds %d images, want 1", archive, len(m.Manifests))
	}
	if m.Manifests[0].MediaType.IsIndex() {
		multi, err := idx.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(dst, multi, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "image: pushed %s (multi-platform)\n", dst)
		fmt.Println(m.Manifests[0].Digest.String())
		return nil
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Fprintf(os.Stderr, "image: pushed %s\n", dst)
	fmt.Println(d.String())
	return nil
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("%s: entry %q leaves the archive", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := copyTo(target, tr); err != nil {
				return err
			}
		}
	}
}

// copyFrom writes the file at path to w.
func copyFrom(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// copyTo writes r into a new file at path.
func copyTo(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
