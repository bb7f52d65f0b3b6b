package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// imageRepository is the release image's repository (internal/version).
const imageRepository = "ghcr.io/taskops/task-operator"

// kustomize builds a kustomization folder, as `kustomize build dir` does.
func kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// writeManifests writes install.yaml and crds.yaml. The release's image is
// the one config/manager pins (a test keeps it equal to internal/version),
// so a version that is not the repository's is refused rather than
// shipped with another version's image.
func writeManifests(version, out string) error {
	install, err := kustomize("config/default")
	if err != nil {
		return err
	}
	image := imageRepository + ":" + version
	if !strings.Contains(string(install), "image: "+image+"\n") {
		return fmt.Errorf("config/default does not run %s: set the version in internal/version/version.go, config/manager/kustomization.yaml and charts/task-operator/Chart.yaml first (docs/releasing.md)", image)
	}
	crds, err := kustomize("config/crd")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	head := func(what string) []byte {
		return []byte(fmt.Sprintf("# task-operator %s: %s.\n# kubectl apply --server-side -f <this file>   (docs/install.md)\n", version, what))
	}
	if err := os.WriteFile(filepath.Join(out, "install.yaml"), append(head("CRDs, RBAC, namespace, Deployment and metrics Service"), install...), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "crds.yaml"), append(head("the CRDs alone"), crds...), 0o644)
}
