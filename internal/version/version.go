// Package version holds the operator's release version. Images the operator
// chooses for pods (the http runner) are pinned to it, never `:latest`, so a
// cluster that cannot reach a registry runs the image it already has.
//
// Version is right however the binary was built:
//
//   - `make build`, `make image` and `make release` set it with
//     -ldflags "-X github.com/taskops/task-operator/internal/version.Version=vX.Y.Z";
//   - `go install github.com/taskops/task-operator/cmd/kubectl-task@vX.Y.Z`
//     records the module version vX.Y.Z in the binary, which init reads;
//   - any other build (a plain `go build` in a checkout, whose module
//     version is a pseudo-version naming no image) is Release, the version
//     this source tree is.
package version

import (
	"regexp"
	"runtime/debug"
)

// Release is the version this source tree is. A release changes it, and
// config/manager's image tag and the chart's versions with it (tests keep
// them equal; docs/releasing.md).
const Release = "v0.2.0"

// Version is the version of this build, a Docker tag of the release image.
var Version = ""

// Repository is the image repository of the release image, which holds both
// /manager and /task-runner.
const Repository = "ghcr.io/taskops/task-operator"

// Image is the release image of this build: Repository:Version.
func Image() string { return Repository + ":" + Version }

// releaseVersion matches a release's semantic version and refuses Go's
// pseudo-versions (v0.0.0-20261202073948-5384f57ab0c1) and +dirty builds,
// for which no image exists.
var (
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)
	pseudoVersion  = regexp.MustCompile(`\d{14}-[0-9a-f]{12}$`)
)

func init() {
	if Version == "" {
		Version = fromBuild()
	}
}

func fromBuild() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; releaseVersion.MatchString(v) && !pseudoVersion.MatchString(v) {
			return v
		}
	}
	return Release
}
