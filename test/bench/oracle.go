package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
)

// The oracles: the creates the operator must do, done by the smallest
// program that can do them, so that "operator / oracle" says what the
// operator's own work costs on the same cluster. An oracle is this binary
// run again with -oracle-namespace (its own process and connection, its own
// user agent, 32 workers, no client-side limit) that creates the Jobs the
// operator would (jobs.Build) and nothing else (no status, no finalizer, no
// events), in one of three modes (and a fourth, floor.go's, that makes the
// operator's whole traffic):
//
//	burst  watch the namespace's Tasks; for each new one, create its Job
//	pre    list the namespace's Tasks (created before it started); create their Jobs
//	cron   list the namespace's cron Tasks; at the slot, create their slot's Jobs

// oracleUserAgent is the oracles' user agent, by which the audit log tells
// their creates apart.
const oracleUserAgent = "task-operator-oracle"

// oracleMode is what an oracle process does (-oracle-mode).
type oracleMode string

const (
	oracleBurst oracleMode = "burst"
	oraclePre   oracleMode = "pre"
	oracleCron  oracleMode = "cron"
)

// oracleArgs is an oracle process's command line.
type oracleArgs struct {
	kubeconfig, namespace string
	mode                  oracleMode
	n, workers            int
	slot                  time.Time // cron: the slot
	split                 int       // floor: report its CPU at this many ends too (0: no)
}

// oracleMain runs an oracle until it has created n Jobs; it prints
// "ready" once it has what it needs (burst: its watch is open; pre: at
// once; cron: the Tasks listed, before the slot).
func oracleMain(a oracleArgs) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", a.kubeconfig)
	if err != nil {
		return err
	}
	if a.mode == oracleFloor {
		return floorMain(cfg, a) // floor.go
	}
	cfg.QPS, cfg.UserAgent = -1, oracleUserAgent
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	todo := make(chan *batchv1.Job, a.n)
	var wg sync.WaitGroup
	errs := make(chan error, a.workers)
	for range a.workers {
		wg.Go(func() {
			for j := range todo {
				if err := c.Create(ctx, j); err != nil {
					errs <- fmt.Errorf("creating Job %s: %w", j.Name, err)
					return
				}
			}
		})
	}
	finish := func() error {
		close(todo)
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	oneShot := func(t *v1alpha1.Task) *batchv1.Job { return jobs.Build(t, runs.OneShot, 1, nil, nil, benchJobOptions) }
	switch a.mode {
	case oracleBurst:
		w, err := c.Watch(ctx, &v1alpha1.TaskList{}, client.InNamespace(a.namespace))
		if err != nil {
			return err
		}
		defer w.Stop()
		fmt.Println("ready")
		for seen := 0; seen < a.n; {
			ev, ok := <-w.ResultChan()
			if !ok {
				return fmt.Errorf("the Task watch closed after %d Tasks", seen)
			}
			if t, isTask := ev.Object.(*v1alpha1.Task); isTask && ev.Type == watch.Added {
				todo <- oneShot(t)
				seen++
			}
		}
	case oraclePre, oracleCron:
		var tl v1alpha1.TaskList
		if err := c.List(ctx, &tl, client.InNamespace(a.namespace)); err != nil {
			return err
		}
		if len(tl.Items) < a.n {
			return fmt.Errorf("%d Tasks in %s, want %d", len(tl.Items), a.namespace, a.n)
		}
		fmt.Println("ready")
		if a.mode == oracleCron {
			time.Sleep(time.Until(a.slot))
		}
		for i := range tl.Items[:a.n] {
			if a.mode == oraclePre {
				todo <- oneShot(&tl.Items[i])
			} else {
				todo <- jobs.Build(&tl.Items[i], runs.ScheduledID(a.slot), 1, &a.slot, nil, benchJobOptions)
			}
		}
	default:
		return fmt.Errorf("unknown oracle mode %q", a.mode)
	}
	return finish()
}

// oracleProcess is a running oracle.
type oracleProcess struct {
	cmd    *exec.Cmd
	stderr *strings.Builder
	// stdout is what it printed after "ready" (the floor: its CPU), whole
	// once wait returned.
	stdout  *strings.Builder
	copied  chan struct{}
	started time.Time // just before the process was started
}

// startOracle starts an oracle and waits for its "ready".
func startOracle(ctx context.Context, o *options, cl *cluster, a oracleArgs) (*oracleProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-oracle-namespace", a.namespace, "-oracle-kubeconfig", cl.kubeconfig, "-oracle-mode", string(a.mode),
		"-n", fmt.Sprint(a.n), "-workers", fmt.Sprint(o.workers)}
	if !a.slot.IsZero() {
		args = append(args, "-oracle-slot", fmt.Sprint(a.slot.Unix()))
	}
	if a.split > 0 {
		args = append(args, "-oracle-split", fmt.Sprint(a.split))
	}
	p := &oracleProcess{cmd: exec.CommandContext(ctx, self, args...), stderr: &strings.Builder{}, stdout: &strings.Builder{}, copied: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = p.cmd.Wait()
		return nil, fmt.Errorf("the oracle did not start: %s", p.stderr.String())
	}
	go func() {
		defer close(p.copied)
		for lines.Scan() {
			p.stdout.WriteString(lines.Text() + "\n")
		}
	}()
	return p, nil
}

// wait waits for the oracle to finish its creates.
func (p *oracleProcess) wait() error {
	<-p.copied // Wait closes the pipe: read it all first
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("the oracle: %v: %s", err, p.stderr.String())
	}
	return nil
}

// nthCreateAt is when the API server answered the n-th Job create in ns
// received from start on by a user agent starting with agent, from the
// audit log (nthCreateDone); otherwise when the cluster writes none or the
// log has fewer. Every "to the N-th Job" figure ends this way, the
// operator's and the oracles' alike.
func nthCreateAt(cl *cluster, ns, agent string, start time.Time, n int, otherwise time.Time) (time.Time, error) {
	if cl.audit == "" {
		return otherwise, nil
	}
	at, ok, err := nthCreateDone(cl.audit, ns, agent, start, n)
	if err != nil || !ok {
		return otherwise, err
	}
	return at, nil
}

// oracleResult is one oracle burst.
type oracleResult struct {
	firstToNth float64 // s from the first Task create to the N-th Job create's response
}

// runOracleBurst runs the oracle as its own process over N new Tasks in a
// namespace of its own, then removes them and their Jobs (and waits until
// their pods are gone) so the operator's burst starts on the same quiet
// cluster.
func runOracleBurst(ctx context.Context, o *options, cl *cluster) (oracleResult, error) {
	var res oracleResult
	if err := cl.ensureNamespace(ctx, oracleNamespace); err != nil {
		return res, err
	}
	if err := waitQuiet(ctx, o, cl, "the oracle burst"); err != nil {
		return res, err
	}
	p, err := startOracle(ctx, o, cl, oracleArgs{namespace: oracleNamespace, mode: oracleBurst, n: o.n})
	if err != nil {
		return res, err
	}
	start, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(oracleNamespace, fmt.Sprintf("oracle-%05d", i))
	})
	if err != nil {
		return res, err
	}
	if err := p.wait(); err != nil {
		return res, err
	}
	end, err := nthCreateAt(cl, oracleNamespace, oracleUserAgent, start, o.n, time.Now()) // now: an upper bound
	if err != nil {
		return res, err
	}
	res.firstToNth = end.Sub(start).Seconds()
	o.logf("oracle burst: %d Tasks, %d-th Job after %.2f s", o.n, o.n, res.firstToNth)
	return res, cleanNamespace(ctx, o, cl, oracleNamespace)
}

// runOraclePre creates N one-shot Tasks, then (the API server quiet) runs
// the oracle over them: from its process start to the N-th Job create's
// response. It cleans up as runOracleBurst does.
func runOraclePre(ctx context.Context, o *options, cl *cluster) (float64, error) {
	if err := cl.ensureNamespace(ctx, oracleNamespace); err != nil {
		return 0, err
	}
	if _, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(oracleNamespace, fmt.Sprintf("oracle-%05d", i))
	}); err != nil {
		return 0, err
	}
	if err := waitQuiet(ctx, o, cl, "the pre-created oracle"); err != nil {
		return 0, err
	}
	p, err := startOracle(ctx, o, cl, oracleArgs{namespace: oracleNamespace, mode: oraclePre, n: o.n})
	if err != nil {
		return 0, err
	}
	if err := p.wait(); err != nil {
		return 0, err
	}
	end, err := nthCreateAt(cl, oracleNamespace, oracleUserAgent, p.started, o.n, time.Now())
	if err != nil {
		return 0, err
	}
	d := end.Sub(p.started).Seconds()
	o.logf("oracle pre-created: %d Tasks, process start to the %d-th Job %.2f s", o.n, o.n, d)
	return d, cleanNamespace(ctx, o, cl, oracleNamespace)
}

// oracleNamespace is where the burst and pre-created oracles work (next to
// the operator's namespace, emptied before the operator runs).
const oracleNamespace = "bench-oracle"

// clearForOracle stops the operator and deletes its Tasks, Jobs and pods,
// so that an oracle run after it meets the cluster as the one before it
// did: the second side of a bracket.
func clearForOracle(ctx context.Context, o *options, cl *cluster, op *operator) error {
	op.stop(o)
	if err := cleanNamespace(ctx, o, cl, benchNamespace); err != nil {
		return fmt.Errorf("cleaning up before the second oracle run: %w", err)
	}
	return nil
}

// cleanNamespace deletes a namespace's Tasks (the finalizer policy gave
// them a finalizer no operator removes here), Jobs and pods, and waits
// until they are gone.
func cleanNamespace(ctx context.Context, o *options, cl *cluster, ns string) error {
	var tl v1alpha1.TaskList
	if err := cl.c.List(ctx, &tl, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := forAll(ctx, len(tl.Items), o.workers, func(i int) error {
		if len(tl.Items[i].Finalizers) == 0 {
			return nil
		}
		return client.IgnoreNotFound(cl.c.Patch(ctx, &tl.Items[i], noFinalizers))
	}); err != nil {
		return err
	}
	if err := cl.c.DeleteAllOf(ctx, &v1alpha1.Task{}, client.InNamespace(ns)); err != nil {
		return err
	}
	if err := cl.c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return err
	}
	// The pods too, at once: the garbage collector would delete them at
	// kube-controller-manager's client limit (20 per second in the cron
	// sessions: 1000 pods take a minute). A running pod's Job-tracking
	// finalizer still waits for the Job controller.
	if err := cl.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
		return err
	}
	return poll(ctx, 5*time.Minute, 500*time.Millisecond, func() (bool, error) {
		pods, err := cl.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		jl, err := cl.cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		var tl v1alpha1.TaskList
		err = cl.c.List(ctx, &tl, client.InNamespace(ns), client.Limit(1))
		return err == nil && len(pods.Items) == 0 && len(jl.Items) == 0 && len(tl.Items) == 0, err
	})
}

// noFinalizers is a merge patch that removes every finalizer.
var noFinalizers = client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
