// Package version holds the operator's release version. Images the operator
// chooses for pods (the http runner) are pinned to it, never `:latest`, so a
// cluster that cannot reach a registry runs the image it already has.
//
// `make build` and `make image` set it from the Makefile's VERSION with
//
//	-ldflags "-X github.com/taskops/task-operator/internal/version.Version=vX.Y.Z"
//
// A plain `go build` keeps the default below, which is the version the
// repository is at.
package version

// Version is the release version, a Docker tag (no leading "v" stripped).
var Version = "v0.1.0"

// Repository is the image repository of the release image, which holds both
// /manager and /task-runner.
const Repository = "ghcr.io/taskops/task-operator"

// Image is the release image of this build: Repository:Version.
func Image() string { return Repository + ":" + Version }
