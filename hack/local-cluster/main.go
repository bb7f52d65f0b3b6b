// Command local-cluster runs the project's local Kubernetes control plane
// (test/localcluster has what it is and what lives in its folder). People
// and scripts run it as hack/local-cluster.sh, which builds it first:
//
//	hack/local-cluster.sh up            [--dir DIR]  start (or reuse) the cluster
//	hack/local-cluster.sh down          [--dir DIR]  stop everything it started
//	hack/local-cluster.sh status        [--dir DIR]  exit 0 when up, 1 when not
//	hack/local-cluster.sh kubeconfig    [--dir DIR]  print the kubeconfig path (fails when down)
//	hack/local-cluster.sh load-image    [--dir DIR] ARCHIVE...
//	                                                 import OCI image archives (make image)
//	                                                 into the real node's containerd
//	hack/local-cluster.sh start-kubelet [--dir DIR]  start the real node's kubelet again
//	                                                 when it is not running (after a crash)
//
// `up` prints progress on stderr and one line on stdout,
//
//	export KUBECONFIG=DIR/kubeconfig
//
// so a caller can `eval "$(hack/local-cluster.sh up)"`. `up` on a running
// cluster only prints that line again (unless the settings below changed:
// then it restarts). Each fresh `up` starts from an empty etcd. The
// kubeconfig is an admin (system:masters) client-certificate kubeconfig,
// context `local-cluster`. A Ctrl-C during `up` stops what it started.
//
// DIR defaults to $LOCAL_CLUSTER_DIR, else <repo>/tmp/local-cluster
// (git-ignored). Environment (localcluster.Settings):
//
//	LOCAL_CLUSTER_NODE          real | kwok | both | auto (default auto: real when
//	                            this machine can run it, else kwok, saying why).
//	                            The real node needs Linux, root and the Debian
//	                            packages hack/real-node-deps.sh installs (`up`
//	                            runs it); kwok is for scale and other machines.
//	KCM_QPS, KCM_BURST          kube-controller-manager --kube-api-qps/--kube-api-burst
//	                            (default 20/30, the controller-manager's own defaults)
//	LOCAL_CLUSTER_NODE_PODS     pods the kwok node can hold (default 1000)
//	LOCAL_CLUSTER_POD_GC_THRESHOLD  finished pods kept before the pod garbage
//	                            collector deletes the oldest (default 12500,
//	                            kube-controller-manager's own)
//	LOCAL_CLUSTER_TIMEOUT       seconds `up` waits for each readiness step (default 120)
//	LOCAL_CLUSTER_AUDIT_POLICY  an audit policy file: the API server logs to DIR/logs/audit.log
//	KUBEBUILDER_ASSETS          honoured by hack/k8s-binaries.sh
//
// Pods on the real node run for real: the images it has are the pause and
// busybox:1.37 images `up` builds and imports, plus what `load-image` adds
// (nothing is pulled; no registry is reachable). Pods on the kwok node are
// simulated by the kwok stages in hack/kwok/stages.yaml (see
// hack/kwok/README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/taskops/task-operator/test/localcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "local-cluster: error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return errors.New("a command is needed: up, down, status, kubeconfig, load-image or start-kubelet (see hack/local-cluster/main.go)")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("local-cluster "+cmd, flag.ContinueOnError)
	dir := fs.String("dir", envOr("LOCAL_CLUSTER_DIR", filepath.Join(root, "tmp", "local-cluster")), "the cluster's state folder")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 && cmd != "load-image" {
		return fmt.Errorf("unknown argument: %s", fs.Arg(0))
	}
	settings, err := localcluster.SettingsFromEnv(nil)
	if err != nil {
		return err
	}
	c, err := localcluster.New(root, *dir, settings, os.Stderr)
	if err != nil {
		return err
	}
	// A signal cancels the context: `up` then stops what it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	switch cmd {
	case "up":
		kubeconfig, err := c.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("export KUBECONFIG=%s\n", localcluster.ShellQuote(kubeconfig))
		return nil
	case "down":
		return c.Down()
	case "status":
		if err := c.Status(ctx, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "local-cluster:", err)
			os.Exit(1)
		}
		return nil
	case "kubeconfig":
		p, err := c.Kubeconfig()
		if err != nil {
			return err
		}
		fmt.Println(p)
		return nil
	case "load-image":
		if fs.NArg() == 0 {
			return errors.New("load-image needs at least one image archive")
		}
		return c.LoadImages(fs.Args()...)
	case "start-kubelet":
		return c.StartKubelet(ctx)
	}
	return fmt.Errorf("unknown command: %q", cmd)
}

// repoRoot is the repository the command was built in: hack/local-cluster.sh
// builds it into <repo>/bin; `go run` from the repository works too.
func repoRoot() (string, error) {
	candidates := []string{}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Dir(filepath.Dir(exe)))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
			candidates = append(candidates, d)
		}
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "hack", "k8s-binaries.sh")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("cannot find the repository (hack/k8s-binaries.sh): run hack/local-cluster.sh")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
