package fuzz_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
)

// play is how the test plays the Job controller, the user and time for one
// input: script is read 3 bits per step (the top bits give the number of
// steps), message and exitCode are what a failing or succeeding pod says.
type play struct {
	script   uint64
	message  string
	exitCode int64
}

// Actions, one per step.
const (
	actNothing      = iota // one more pass: must change nothing it did not have to
	actFailPod             // the newest active Job fails (BackoffLimitExceeded), its pod says message
	actFailDeadline        // the newest active Job fails with DeadlineExceeded, no pod
	actFailPolicy          // the newest active Job fails by podFailurePolicy (exit 2)
	actComplete            // the newest active Job succeeds, its pod says message
	actWake                // the clock moves to the time the last pass asked to be woken
	actRunNow              // a new run-now token
	actFarFuture           // the clock jumps 400 days
)

const maxMessageBytes = 1024

var taskSeq atomic.Int64

// uniqueName makes name unique in this process, keeping it a DNS label of
// at most 63 characters; invalid names (admission covers them) become
// "task".
func uniqueName(name string) string {
	suffix := "-" + strconv.FormatInt(taskSeq.Add(1), 10)
	if len(validation.IsDNS1123Label(name)) > 0 {
		name = "task"
	}
	if len(name) > 63-len(suffix) {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	return name + suffix
}

// driver drives one Task through hand-driven passes.
type driver struct {
	ctx    context.Context
	c      *check
	hs     *harness
	a      admission
	key    client.ObjectKey
	clock  *clocktesting.FakeClock
	rec    *reconciler.TaskReconciler
	events *events.FakeRecorder
	last   reconcile.Result
	// history is what the status said of each run so far: attempts and
	// results never go backwards.
	history map[string]v1alpha1.RunRecord
}

func reconcileInput(ctx context.Context, c *check, hs *harness, p play) {
	name := uniqueName(c.in.Name)
	a := admit(ctx, c, hs, reconcileNS, name)
	if a.refused != nil || a.task == nil || c.t.Failed() {
		return
	}
	in := c.in
	in.Name = name
	u := in.task(reconcileNS, name)
	if err := hs.k8s.Create(ctx, u); err != nil {
		finding := ""
		if apierrors.IsInternalError(err) && (strings.Contains(err.Error(), "larger than max") || strings.Contains(err.Error(), "request is too large")) {
			finding = "F4"
		}
		c.fail(finding, "a Task the dry-run accepted was refused when created for real (%s): %v", reasonOf(err), err)
		return
	}
	rec := events.NewFakeRecorder(1000)
	d := &driver{
		ctx: ctx, c: c, hs: hs, a: a,
		key:    client.ObjectKey{Namespace: reconcileNS, Name: name},
		clock:  clocktesting.NewFakeClock(time.Now()),
		events: rec,
	}
	d.rec = &reconciler.TaskReconciler{Client: hs.mgrClient, APIReader: hs.apiReader, Recorder: rec, Clock: d.clock, Jobs: jobOpts, Owners: hs.owners, Shortcuts: testutil.Shortcuts()}
	d.history = map[string]v1alpha1.RunRecord{}
	defer d.cleanup()

	if !d.pass("first pass") {
		return
	}
	d.checkFirstPass()
	steps := 2 + int(p.script>>58)%5
	message := p.message
	if p.script&(1<<57) != 0 {
		message = stretch(message, 3000) // multi-byte messages cut to 1 KiB
	}
	for i := 0; i < steps && !c.t.Failed(); i++ {
		act := int(p.script>>(3*i)) & 7
		if !d.act(act, i, message, p.exitCode) {
			return
		}
		if !d.pass(fmt.Sprintf("step %d (action %d)", i, act)) {
			return
		}
	}
}

// act does one action; false when the Task is gone.
func (d *driver) act(act, step int, message string, exitCode int64) bool {
	c := d.c
	switch act {
	case actFailPod, actFailDeadline, actFailPolicy, actComplete:
		job := d.newestActiveJob()
		if job == nil {
			return true
		}
		now := d.clock.Now()
		var err error
		switch act {
		case actFailPod:
			code := int32(clamp(exitCode, 1, 255))
			d.pod(job, code, message)
			err = testutil.FailJob(d.ctx, d.hs.k8s, job, now, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
		case actFailDeadline:
			err = testutil.FailJob(d.ctx, d.hs.k8s, job, now, "DeadlineExceeded", "Job was active longer than specified deadline")
		case actFailPolicy:
			d.pod(job, 2, message)
			err = testutil.FailJob(d.ctx, d.hs.k8s, job, now, "PodFailurePolicy", "Container task for pod x failed with exit code 2 matching FailJob rule at index 1")
		case actComplete:
			d.pod(job, 0, message)
			err = testutil.CompleteJob(d.ctx, d.hs.k8s, job, now)
		}
		if err != nil {
			c.t.Fatalf("playing the Job controller: %v", err)
		}
	case actWake:
		if d.last.RequeueAfter > 0 {
			d.clock.Step(d.last.RequeueAfter)
		} else {
			d.clock.Step(time.Hour)
		}
	case actRunNow:
		token := fmt.Sprintf("%s-%d", short(message), step)
		task := &v1alpha1.Task{}
		if err := d.hs.k8s.Get(d.ctx, d.key, task); err != nil {
			if apierrors.IsNotFound(err) {
				return false
			}
			c.t.Fatalf("getting the Task: %v", err)
		}
		patch := client.MergeFrom(task.DeepCopy())
		if task.Annotations == nil {
			task.Annotations = map[string]string{}
		}
		task.Annotations[v1alpha1.AnnotationRunNow] = token
		if err := d.hs.k8s.Patch(d.ctx, task, patch); err != nil {
			c.t.Fatalf("setting run-now: %v", err)
		}
	case actFarFuture:
		d.clock.Step(400 * 24 * time.Hour)
	}
	return true
}

// pod makes the pod of index 0 of job, terminated with code and message.
func (d *driver) pod(job *batchv1.Job, code int32, message string) {
	if _, err := testutil.PodOf(d.ctx, d.hs.k8s, job, 0, testutil.Terminated(code, message)); err != nil && !apierrors.IsAlreadyExists(err) {
		d.c.t.Fatalf("creating a pod of %s: %v", job.Name, err)
	}
}

// pass runs one reconcile once the cache has what the API server has, the
// way the workqueue would (a conflict is retried), then checks the
// invariants. false when the Task is gone.
func (d *driver) pass(what string) bool {
	c := d.c
	c.t.Helper()
	var res reconcile.Result
	var err error
	// A pass that created Jobs leaves the status write to the pass their
	// create events bring: run that one too, as the workqueue would.
	for round := 0; round < 3 && err == nil; round++ {
		before := len(d.jobs())
		for i := 0; i < 5; i++ {
			d.syncCache()
			res, err = d.rec.Reconcile(d.ctx, reconcile.Request{NamespacedName: d.key})
			if !apierrors.IsConflict(err) {
				break
			}
		}
		if len(d.jobs()) == before {
			break
		}
	}
	if err != nil {
		c.fail("", "%s: Reconcile returned an error that is not a conflict: %v", what, err)
		return false
	}
	d.last = res
	d.checkEvents()
	return d.checkInvariants(what)
}

// syncCache waits until the manager's cache holds exactly what the API
// server holds for this Task and its Jobs: a real pass only runs after its
// informers saw the change that triggered it.
func (d *driver) syncCache() {
	want, err := d.state(d.hs.k8s)
	if err != nil {
		d.c.t.Fatalf("reading the Task and its Jobs: %v", err)
	}
	deadline := time.Now().Add(testutil.Timeout(15 * time.Second))
	for {
		got, err := d.state(d.hs.mgrClient)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			d.c.t.Fatalf("the cache did not catch up: want %s, have %s (%v)", want, got, err)
		}
		time.Sleep(time.Millisecond) // polling the cache
	}
}

// state is the Task's and its Jobs' resource versions as c sees them.
func (d *driver) state(c client.Reader) (string, error) {
	task := &v1alpha1.Task{}
	s := "gone"
	if err := c.Get(d.ctx, d.key, task); err == nil {
		s = task.ResourceVersion
	} else if !apierrors.IsNotFound(err) {
		return "", err
	}
	var list batchv1.JobList
	if err := c.List(d.ctx, &list, client.InNamespace(d.key.Namespace), client.MatchingLabels{v1alpha1.LabelTask: d.key.Name}); err != nil {
		return "", err
	}
	names := make([]string, 0, len(list.Items))
	for _, j := range list.Items {
		names = append(names, j.Name+"@"+j.ResourceVersion)
	}
	sort.Strings(names)
	return s + " " + strings.Join(names, ","), nil
}

func (d *driver) jobs() []batchv1.Job {
	var list batchv1.JobList
	if err := d.hs.k8s.List(d.ctx, &list, client.InNamespace(d.key.Namespace), client.MatchingLabels{v1alpha1.LabelTask: d.key.Name}); err != nil {
		d.c.t.Fatalf("listing Jobs: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return list.Items
}

// newestActiveJob is the newest Job that has not finished and is not
// suspended.
func (d *driver) newestActiveJob() *batchv1.Job {
	js := d.jobs()
	for i := len(js) - 1; i >= 0; i-- {
		j := js[i]
		if j.Spec.Suspend != nil && *j.Spec.Suspend {
			continue
		}
		finished := false
		for _, cond := range j.Status.Conditions {
			if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
				finished = true
			}
		}
		if !finished {
			return &j
		}
	}
	return nil
}

// checkFirstPass: a spec the reconciler cannot act on is reported as the
// contract says on the first pass.
func (d *driver) checkFirstPass() {
	task := &v1alpha1.Task{}
	if err := d.hs.k8s.Get(d.ctx, d.key, task); err != nil {
		return
	}
	ready := meta.FindStatusCondition(task.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil {
		return // checkInvariants reported it
	}
	oneShot := task.Spec.Schedule == nil
	suspended := task.Spec.Suspend != nil && *task.Spec.Suspend
	switch want := d.a.reportedInvalid(); {
	case want == v1alpha1.ReasonInvalidSchedule && ready.Reason != string(want):
		d.c.fail("", "the schedule is invalid (%v) but Ready is %s/%s", d.a.parseErr, ready.Status, ready.Reason)
	case want == v1alpha1.ReasonInvalidSpec && oneShot && !suspended && ready.Reason != string(want):
		d.c.fail("", "the Job is refused (%v) but Ready is %s/%s", d.a.jobErr, ready.Status, ready.Reason)
	case want == v1alpha1.ReasonInvalidSchedule && d.last.RequeueAfter != 0:
		d.c.fail("", "an invalid schedule is looked at again in %v: nothing changes without a spec edit", d.last.RequeueAfter)
	}
}

// checkInvariants checks the stored Task and its Jobs after a pass.
func (d *driver) checkInvariants(what string) bool {
	c := d.c
	task := &v1alpha1.Task{}
	if err := d.hs.k8s.Get(d.ctx, d.key, task); err != nil {
		if apierrors.IsNotFound(err) {
			return false
		}
		c.t.Fatalf("getting the Task: %v", err)
	}
	if !task.DeletionTimestamp.IsZero() {
		return false // ttlSecondsAfterFinished: the next pass lets it go (cleanup checks)
	}
	st := task.Status
	fail := func(format string, args ...any) {
		c.t.Helper()
		c.fail("", "%s: "+format+"\nstatus: %s", append(append([]any{what}, args...), summary(task))...)
	}
	maxAttempts := task.Spec.MaxRetry + 1

	if st.ObservedGeneration != task.Generation {
		fail("observedGeneration %d, generation %d", st.ObservedGeneration, task.Generation)
	}
	for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionFailed, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
		cond := meta.FindStatusCondition(st.Conditions, typ)
		switch {
		case cond == nil:
			fail("condition %s is missing", typ)
		case cond.ObservedGeneration != task.Generation:
			fail("condition %s has observedGeneration %d, generation is %d", typ, cond.ObservedGeneration, task.Generation)
		}
	}
	if st.Attempts > maxAttempts {
		fail("status.attempts %d > maxRetry+1 = %d", st.Attempts, maxAttempts)
	}
	if st.RetryCount != max(st.Attempts-1, 0) {
		fail("retryCount %d with attempts %d", st.RetryCount, st.Attempts)
	}
	if len(st.LastError) > maxMessageBytes {
		fail("lastError is %d bytes, more than 1 KiB", len(st.LastError))
	}
	if len(st.History) > 10 {
		fail("history has %d runs, more than 10", len(st.History))
	}
	for _, h := range st.History {
		if h.Attempts > maxAttempts {
			fail("run %s has %d attempts > maxRetry+1 = %d", h.RunID, h.Attempts, maxAttempts)
		}
		if len(h.Message) > maxMessageBytes {
			fail("the message of run %s is %d bytes, more than 1 KiB", h.RunID, len(h.Message))
		}
		if prev, ok := d.history[h.RunID]; ok {
			if h.Attempts < prev.Attempts {
				fail("run %s went back from %d to %d attempts", h.RunID, prev.Attempts, h.Attempts)
			}
			if prev.Result != v1alpha1.RunResultRunning && h.Result == v1alpha1.RunResultRunning {
				fail("run %s went back from %s to Running", h.RunID, prev.Result)
			}
		}
		d.history[h.RunID] = h
	}

	js := d.jobs()
	seen := map[string]string{}
	for _, j := range js {
		k := j.Labels[v1alpha1.LabelRun] + "/" + j.Labels[v1alpha1.LabelAttempt]
		if other, dup := seen[k]; dup {
			fail("two Jobs for run/attempt %s: %s and %s", k, other, j.Name)
		}
		seen[k] = j.Name
		if n, err := strconv.Atoi(j.Labels[v1alpha1.LabelAttempt]); err != nil || n < 1 || int32(n) > maxAttempts {
			fail("Job %s has attempt %q, outside 1..%d", j.Name, j.Labels[v1alpha1.LabelAttempt], maxAttempts)
		}
		if ref := metav1.GetControllerOf(&j); ref == nil || ref.UID != task.UID {
			fail("Job %s is not controlled by the Task", j.Name)
		}
	}

	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if ready != nil {
		switch v1alpha1.Reason(ready.Reason) {
		case v1alpha1.ReasonInvalidSpec:
			if len(js) > 0 {
				fail("InvalidSpec with %d Job(s)", len(js))
			}
			if d.a.jobErr == nil {
				fail("InvalidSpec (%s), but the API server accepts the Job (dry-run)", ready.Message)
			}
		case v1alpha1.ReasonInvalidSchedule:
			if len(js) > 0 {
				fail("InvalidSchedule with %d Job(s)", len(js))
			}
			if d.a.parseErr == nil {
				fail("InvalidSchedule (%s), but scheduler.Parse accepts the schedule", ready.Message)
			}
		}
		if v1alpha1.Reason(ready.Reason) != v1alpha1.ReasonInvalidSchedule && d.a.parseErr != nil {
			fail("the schedule is invalid (%v), but Ready is %s/%s", d.a.parseErr, ready.Status, ready.Reason)
		}
	}
	if len(js) > 0 && d.a.reportedInvalid() != "" {
		fail("a spec the reconciler cannot act on (%s) has %d Job(s)", d.a.reportedInvalid(), len(js))
	}
	return true
}

// checkEvents: every event note is bounded (head(note, 1 KiB)).
func (d *driver) checkEvents() {
	for {
		select {
		case e := <-d.events.Events:
			// "<type> <reason> <note>"
			parts := strings.SplitN(e, " ", 3)
			if len(parts) == 3 && len(parts[2]) > maxMessageBytes {
				d.c.fail("", "an event note is %d bytes, more than 1 KiB: %s", len(parts[2]), short(e))
			}
		default:
			return
		}
	}
}

// cleanup deletes the Task the way a user does, lets a pass run the
// finalizer, and checks that the Task and its Jobs are gone; whatever is
// left is removed by force so the next input starts clean.
func (d *driver) cleanup() {
	c, k8s := d.c, d.hs.k8s
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(30*time.Second))
	defer cancel()
	d.ctx = ctx
	task := &v1alpha1.Task{}
	if err := k8s.Get(ctx, d.key, task); err == nil {
		if err := k8s.Delete(ctx, task); err != nil && !apierrors.IsNotFound(err) {
			c.t.Errorf("deleting the Task: %v", err)
		}
		if !c.t.Failed() {
			d.deletePass()
		}
	}
	// Force what is left.
	if err := k8s.Get(ctx, d.key, task); err == nil {
		if len(task.Finalizers) > 0 {
			_ = k8s.Patch(ctx, task, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		}
		_ = k8s.Delete(ctx, task)
	}
	sel := client.MatchingLabels{v1alpha1.LabelTask: d.key.Name}
	_ = k8s.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(d.key.Namespace), sel, client.PropagationPolicy(metav1.DeletePropagationBackground))
	_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(d.key.Namespace), sel, client.GracePeriodSeconds(0))
}

// deletePass runs the finalizer and checks it let the Task go with its Jobs.
func (d *driver) deletePass() {
	c := d.c
	var err error
	for i := 0; i < 5; i++ {
		d.syncCacheSoft()
		_, err = d.rec.Reconcile(d.ctx, reconcile.Request{NamespacedName: d.key})
		if !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		c.fail("", "deleting: Reconcile returned an error that is not a conflict: %v", err)
		return
	}
	task := &v1alpha1.Task{}
	if err := d.hs.k8s.Get(d.ctx, d.key, task); !apierrors.IsNotFound(err) {
		c.fail("", "the deleted Task is still there after a pass (finalizers %v, err %v)", task.Finalizers, err)
	}
	if js := d.jobs(); len(js) > 0 {
		c.fail("", "the deleted Task left %d Job(s)", len(js))
	}
}

// syncCacheSoft is syncCache that does not stop the test (cleanup runs
// after failures too).
func (d *driver) syncCacheSoft() {
	want, err := d.state(d.hs.k8s)
	if err != nil {
		return
	}
	deadline := time.Now().Add(testutil.Timeout(15 * time.Second))
	for time.Now().Before(deadline) {
		if got, err := d.state(d.hs.mgrClient); err == nil && got == want {
			return
		}
		time.Sleep(time.Millisecond) // polling the cache
	}
	d.c.t.Errorf("the cache did not catch up with the deleted Task")
}

func summary(t *v1alpha1.Task) string {
	s := t.Status
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("phase=%s run=%s attempts=%d active=%d history=%d lastError=%s %s",
		s.Phase, s.CurrentRun, s.Attempts, len(s.Active), len(s.History), short(s.LastError), strings.Join(conds, " "))
}
