//go:build kueue

package kueue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/test/harness"
)

// env is what every test uses.
var env struct {
	ws       *harness.Workspace
	cluster  *harness.Cluster
	c        client.WithWatch
	op       *harness.Operator
	kueueLog string
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "kueue: "+format+"\n", args...) }

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) (code int) {
	ws, err := harness.NewWorkspace("KUEUE", "kueue")
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.ws = ws
	var cleanups harness.Cleanups
	teardown := func() {
		cleanups.Run()
		if err := ws.Close(env.cluster, logf); err != nil {
			code = 1
		}
	}
	defer teardown()
	harness.CleanupOnSignal(logf, teardown)

	t0 := time.Now()
	kueueBin, crds, err := harness.KueueBuild(ws.Root)
	if err != nil {
		logf("%v", err)
		return 1
	}
	logf("kueue %s, CRDs %s (%s)", kueueBin, crds, time.Since(t0).Round(time.Second))

	cluster, err := harness.StartCluster(harness.ClusterOptions{Dir: ws.Dir, Logf: logf, Node: "kwok"})
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.cluster, env.c = cluster, cluster.Client
	if err := cluster.InstallKueueCRDs(crds); err != nil {
		logf("%v", err)
		return 1
	}
	kueue, err := harness.StartKueue(harness.KueueOptions{Bin: kueueBin, Kubeconfig: cluster.Kubeconfig, Dir: filepath.Join(ws.Dir, "kueue")})
	if err != nil {
		logf("starting Kueue: %v", err)
		return 1
	}
	cleanups.Add(kueue.Stop)
	env.kueueLog = kueue.Log

	bin, err := ws.ManagerBinary(logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.op = &harness.Operator{Bin: bin, Kubeconfig: cluster.Kubeconfig, LogPath: filepath.Join(ws.Dir, "operator.log"), Name: "kueue"}
	if _, err := env.op.Start(); err != nil {
		logf("starting the operator: %v", err)
		return 1
	}
	cleanups.Add(func() { _ = env.op.Stop() })
	logf("setup took %s (operator log %s, Kueue log %s)", time.Since(t0).Round(time.Second), env.op.LogPath, env.kueueLog)
	return m.Run()
}
