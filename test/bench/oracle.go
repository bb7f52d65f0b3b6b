package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
)

// The oracle: the creates the operator must do in a burst, done by the
// smallest program that can do them, so that "operator / oracle" says what
// the operator's own work costs on the same cluster. It is this binary run
// again with -oracle-namespace (its own process and connection, its own
// user agent, 32 workers, no client-side limit): it watches the namespace's
// Tasks and, for each new one, creates the Job the operator would
// (jobs.Build), and nothing else (no status, no finalizer, no events).

// oracleUserAgent is the oracle's user agent, by which the audit log tells
// its creates apart.
const oracleUserAgent = "task-operator-oracle"

// oracleMain runs the oracle until it has created n Jobs; it prints
// "ready" once its watch is open.
func oracleMain(kubeconfig, namespace string, n, workers int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.UserAgent = -1, oracleUserAgent
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	w, err := c.Watch(ctx, &v1alpha1.TaskList{}, client.InNamespace(namespace))
	if err != nil {
		return err
	}
	defer w.Stop()
	fmt.Println("ready")
	todo := make(chan *v1alpha1.Task, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for t := range todo {
				if err := c.Create(ctx, jobs.Build(t, runs.OneShot, 1, nil, nil, benchJobOptions)); err != nil {
					errs <- fmt.Errorf("creating the Job of %s: %w", t.Name, err)
					return
				}
			}
		})
	}
	for seen := 0; seen < n; {
		ev, ok := <-w.ResultChan()
		if !ok {
			return fmt.Errorf("the Task watch closed after %d Tasks", seen)
		}
		if t, isTask := ev.Object.(*v1alpha1.Task); isTask && ev.Type == watch.Added {
			todo <- t
			seen++
		}
	}
	close(todo)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
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
	const ns = "bench-oracle"
	var res oracleResult
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return res, err
	}
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	cmd := exec.CommandContext(ctx, self, "-oracle-namespace", ns, "-oracle-kubeconfig", cl.kubeconfig, "-n", fmt.Sprint(o.n), "-workers", fmt.Sprint(o.workers))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return res, err
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Wait()
		return res, fmt.Errorf("the oracle did not start: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	start, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(ns, fmt.Sprintf("oracle-%05d", i))
	})
	if err != nil {
		return res, err
	}
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("the oracle: %v: %s", err, stderr.String())
	}
	end := time.Now() // an upper bound; the audit log knows better
	if cl.audit != "" {
		if at, ok, err := nthCreateDone(cl.audit, ns, oracleUserAgent, start, o.n); err != nil {
			return res, err
		} else if ok {
			end = at
		}
	}
	res.firstToNth = end.Sub(start).Seconds()
	o.logf("oracle burst: %d Tasks, %d-th Job after %.2f s", o.n, o.n, res.firstToNth)
	return res, cleanNamespace(ctx, o, cl, ns)
}

// cleanNamespace deletes a namespace's Tasks (the finalizer policy gave
// them a finalizer no operator removes here) and Jobs, and waits until
// they and their pods are gone.
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

// nthCreateDone is when the API server answered the n-th Job create in
// namespace ns received from start on by a user agent starting with agent
// (the audit log's stageTimestamp); ok is false when the log has fewer.
func nthCreateDone(path, ns, agent string, start time.Time, n int) (time.Time, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false, err
	}
	defer f.Close()
	var done []time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.Verb != "create" || e.ObjectRef == nil {
			continue
		}
		if e.ObjectRef.Resource != "jobs" || e.ObjectRef.Subresource != "" || e.ObjectRef.Namespace != ns ||
			!strings.HasPrefix(e.UserAgent, agent) || e.RequestReceived.Before(start) ||
			e.ResponseStatus == nil || e.ResponseStatus.Code != 201 {
			continue
		}
		done = append(done, e.StageTimestamp)
	}
	if err := sc.Err(); err != nil || len(done) < n {
		return time.Time{}, false, err
	}
	slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
	return done[n-1], true, nil
}
