// Package testutil holds what every test of the project shares:
//
//   - envtest.go: a real kube-apiserver + etcd (envtest) built from pinned
//     modules, the scheme, and the repository root;
//   - jobcontroller.go: a stand-in for the Job controller and the kubelet,
//     which envtest does not run (Jobs completed, failed, pods with exit
//     codes);
//   - builders.go: the one set of test builders (Tasks from options, runs
//     as Kueue-style wrappers) and a Task's kstatus verdict;
//   - watchdog.go: StartEnv, so an interrupted or crashed test binary
//     leaves no etcd or kube-apiserver behind;
//   - warnings.go: the API server's warnings, collected; manifests.go:
//     multi-document YAML manifests as objects;
//   - poll.go: the one Eventually (a condition polled until a deadline),
//     Promptly for a latency promise, and the one NewNamespace every
//     suite uses; timeouts.go: how long a test waits, scaled for the
//     machine in one place (TEST_TIMEOUT_SCALE), and the AtOnce promise.
//
// The end-to-end suites add test/harness on top (the local cluster, the
// manager as a process, observers).
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
)

// RepoRoot is the repository's top folder, absolute: where this source
// file was compiled from, two folders up. The suites, the benchmark and the
// manifests tests all find the repository this way.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Scheme knows the built-in types and Tasks.
func Scheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Assets returns the folder holding etcd and kube-apiserver: the
// KUBEBUILDER_ASSETS folder when it has them, else the project's own
// build (hack/k8s-binaries.sh, which builds them on first use).
func Assets() (string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "k8s-binaries.sh"), "etcd", "kube-apiserver")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("getting etcd and kube-apiserver with hack/k8s-binaries.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// NewEnv is an envtest environment with the Task CRD installed.
func NewEnv() (*envtest.Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                Scheme(),
	}, nil
}

// StartAPIServer starts etcd and kube-apiserver with the Task CRD and
// returns their config, a direct (uncached) client, and a stop function.
func StartAPIServer() (*rest.Config, client.Client, func(), error) {
	env, err := NewEnv()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, stop, err := StartEnv(env)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return cfg, c, stop, nil
}

// FastPathOff reports whether the tests run the operator without its
// speed shortcuts (TASK_OPERATOR_FAST_PATH=false, as the manager's
// --fast-path=false): `make test` runs the reconciler's envtest suite and
// the reconcile fuzz target once that way, since a failure with them off
// is a correctness bug.
func FastPathOff() bool { return os.Getenv("TASK_OPERATOR_FAST_PATH") == "false" }

// Shortcuts are the speed shortcuts of one operator under test: new ones,
// or nil (off) when FastPathOff. The record of a just-started attempt
// does not wait (fastpath.RecordStartDelay): the envtest clock stands
// still unless a test moves it, and that wait ends only as time passes;
// the tests of that wait set it themselves.
func Shortcuts() *fastpath.Shortcuts {
	return fastpath.New(!FastPathOff()).WithRecordStartDelay(0)
}

// SkipWithoutShortcuts skips a test of a speed shortcut itself when the
// shortcuts are off.
func SkipWithoutShortcuts(t interface{ Skip(args ...any) }) {
	if FastPathOff() {
		t.Skip("tests a speed shortcut, and TASK_OPERATOR_FAST_PATH=false turns the shortcuts off")
	}
}
