package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/taskqueue"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/waitline"
	"github.com/taskops/task-operator/test/harness"
)

// watchClient is a client that can watch, for harness.RecordJobs.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	wc, err := client.NewWithWatch(restCfg, client.Options{Scheme: testutil.Scheme()})
	must(t, err)
	return wc
}

func getQueue(t *testing.T, q *v1alpha1.TaskQueue) *v1alpha1.TaskQueue {
	t.Helper()
	got := &v1alpha1.TaskQueue{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(q), got))
	return got
}

func waitQueue(t *testing.T, q *v1alpha1.TaskQueue, what string, ok func(*v1alpha1.TaskQueue) bool) *v1alpha1.TaskQueue {
	t.Helper()
	var got *v1alpha1.TaskQueue
	eventually(t, what, func() (bool, string) {
		got = getQueue(t, q)
		return ok(got), fmt.Sprintf("running=%d queued=%d admitted=%v", got.Status.Running, got.Status.Queued, got.Status.Admitted)
	})
	return got
}

func queuedAs(reason v1alpha1.Reason) func(*v1alpha1.Task) bool {
	return func(t *v1alpha1.Task) bool {
		c := condition(t, v1alpha1.ConditionReady)
		return t.Status.Phase == v1alpha1.PhaseQueued && len(t.Status.Queued) == 1 && c != nil && c.Reason == string(reason)
	}
}

// finishOne completes the one active Job of the namespace's Tasks named
// name and returns it.
func completeTaskJob(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	js := waitJobs(t, task, 1)
	must(t, testutil.CompleteJob(ctx, k8s, &js[0], fakeClock.Now()))
	waitTask(t, task, "phase Succeeded", phaseIs(v1alpha1.PhaseSucceeded))
}

func TestAQueueRunsAtMostMaxRunningAttemptsHigherPriorityFirstThenFirstComeFirstServed(t *testing.T) {
	ns := newNamespace(t)
	jobs := harness.RecordJobs(t, watchClient(t), ns)
	q := testutil.NewTaskQueue(ns, "team", 2)
	q.Spec.Suspend = ptr.To(true)
	must(t, k8s.Create(ctx, q))

	// Three Tasks arrive one after the other, then an urgent one; the
	// suspended queue holds them all in line.
	var tasks []*v1alpha1.Task
	for i, name := range []string{"a", "b", "c", "d", "urgent"} {
		prio := int32(0)
		if name == "urgent" {
			prio = 10
		}
		task := newTask(ns, name, testutil.Queue("team"), testutil.Priority(prio))
		must(t, k8s.Create(ctx, task))
		queuedTask := waitTask(t, task, "queued behind a suspended queue", queuedAs(v1alpha1.ReasonQueueSuspended))
		if i == 0 {
			assertConditions(t, queuedTask, U, F, T, F)
			assertKstatus(t, queuedTask, kstatus.InProgressStatus)
			if c := condition(queuedTask, v1alpha1.ConditionFinished); c == nil || c.Status != F {
				t.Fatalf("Finished while queued: %+v", c)
			}
		}
		tasks = append(tasks, task)
		fakeClock.Step(time.Second)
	}
	waitQueue(t, q, "5 queued, none running", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 5 && q.Status.Running == 0 })
	if len(jobs.Order()) != 0 {
		t.Fatalf("a suspended queue admitted %v", jobs.Order())
	}

	// Resumed: the urgent Task and the first to come run, the rest wait.
	edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.Suspend = nil })
	waitQueue(t, q, "2 running, 3 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 2 && q.Status.Queued == 3 })
	waitJobs(t, tasks[4], 1)
	waitJobs(t, tasks[0], 1)
	waitTask(t, tasks[1], "b still queued", queuedAs(v1alpha1.ReasonQueued))

	// Each finished attempt frees its place for the head of the line.
	completeTaskJob(t, tasks[4])
	waitJobs(t, tasks[1], 1)
	completeTaskJob(t, tasks[0])
	waitJobs(t, tasks[2], 1)
	completeTaskJob(t, tasks[1])
	waitJobs(t, tasks[3], 1)
	completeTaskJob(t, tasks[2])
	completeTaskJob(t, tasks[3])
	waitQueue(t, q, "empty", func(q *v1alpha1.TaskQueue) bool {
		return q.Status.Running == 0 && q.Status.Queued == 0 && q.Status.AdmittedTotal == 5
	})

	want := []string{"urgent", "a", "b", "c", "d"}
	got := jobs.Order()
	if fmt.Sprint(got[:2]) != "[urgent a]" && fmt.Sprint(got[:2]) != "[a urgent]" || fmt.Sprint(got[2:]) != fmt.Sprint(want[2:]) {
		t.Fatalf("Jobs created in order %v, want %v", got, want)
	}
	if m := jobs.MaxActive(); m > 2 {
		t.Fatalf("%d attempts were active at once; the queue admits 2", m)
	}
	var evs corev1.EventList
	must(t, k8s.List(ctx, &evs, client.InNamespace(ns), client.MatchingFields{"reason": string(v1alpha1.EventAdmitted)}))
	if len(evs.Items) != 5 {
		t.Fatalf("%d Admitted events, want 5", len(evs.Items))
	}
}

func TestATaskNamingAMissingQueueWaitsAndStartsOnceTheQueueExists(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "early", testutil.Queue("later"))
	must(t, k8s.Create(ctx, task))
	waiting := waitTask(t, task, "QueueNotFound", queuedAs(v1alpha1.ReasonQueueNotFound))
	if c := condition(waiting, v1alpha1.ConditionReady); c.Status != U {
		t.Fatalf("Ready %s while the queue is missing", c.Status)
	}
	if len(jobsOf(t, task)) != 0 {
		t.Fatal("a Job was created without a queue to admit it")
	}
	must(t, k8s.Create(ctx, testutil.NewTaskQueue(ns, "later", 1)))
	waitJobs(t, task, 1)
	waitTask(t, task, "Running", phaseIs(v1alpha1.PhaseRunning))
}

func TestLoweringMaxRunningStopsNothingAndRaisingItAdmitsAtOnce(t *testing.T) {
	ns := newNamespace(t)
	jobs := harness.RecordJobs(t, watchClient(t), ns)
	q := testutil.NewTaskQueue(ns, "team", 3)
	// All five join the line before anything is admitted. A queue admits
	// only what is in its line, and each Task joins it with its first
	// pass: Tasks created at once join in whatever order their first
	// passes end, so which three run first would be up to chance
	// (docs/queues.md, "Order and starvation").
	q.Spec.Suspend = ptr.To(true)
	must(t, k8s.Create(ctx, q))
	var tasks []*v1alpha1.Task
	for i := range 5 {
		task := newTask(ns, fmt.Sprintf("t%d", i), testutil.Queue("team"))
		must(t, k8s.Create(ctx, task))
		waitTask(t, task, "in line behind the suspended queue", queuedAs(v1alpha1.ReasonQueueSuspended))
		tasks = append(tasks, task)
		fakeClock.Step(time.Second)
	}
	edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.Suspend = nil })
	waitQueue(t, q, "3 running, 2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 3 && q.Status.Queued == 2 })
	for _, task := range tasks[:3] {
		waitJobsAtOnce(t, task, 1) // a place is held from admission; its Job follows on that event
	}

	lowered := edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.MaxRunning = 1 })
	waitQueue(t, q, "generation seen", func(got *v1alpha1.TaskQueue) bool { return got.Status.ObservedGeneration == lowered.Generation })
	for _, task := range tasks[:3] {
		if js := jobsOf(t, task); len(js) != 1 || runs.AttemptOf(&js[0], 1).Phase != runs.Active {
			t.Fatalf("%s: lowering maxRunning touched its running attempt", task.Name)
		}
	}
	// Two finish: still one running, so nothing is admitted below the new cap.
	completeTaskJob(t, tasks[0])
	completeTaskJob(t, tasks[1])
	waitQueue(t, q, "1 running, 2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 1 && q.Status.Queued == 2 })
	if len(jobsOf(t, tasks[3])) != 0 {
		t.Fatal("admitted while at the lowered cap")
	}

	edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.MaxRunning = 3 })
	waitJobsAtOnce(t, tasks[3], 1)
	waitJobsAtOnce(t, tasks[4], 1)
	if m := jobs.MaxActive(); m > 3 {
		t.Fatalf("%d attempts active at once", m)
	}
}

// staleTask is a cache whose Task is behind the API server: Get answers
// the Task as it was, whatever the API server holds now.
type staleTask struct {
	client.Client
	task *v1alpha1.Task
}

func (s staleTask) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if t, ok := obj.(*v1alpha1.Task); ok && key == client.ObjectKeyFromObject(s.task) {
		s.task.DeepCopyInto(t)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// An admission wakes its Task through the TaskQueue's event (or, with the
// speed shortcuts, directly), and that Task's cache can be behind: the
// pass may read the Task as it was before its status put it in line.
// Whatever the order in which the two caches learn of the line and the
// admission, the pass that the admission brings creates the Job: a Task's
// attempts have deterministic Job names, so the older Task plans the same
// attempt, and the record admits it by that name. Nothing waits for a
// recheck.
func TestAnAdmittedTaskReadFromABehindCacheStartsInThePassTheAdmissionBrings(t *testing.T) {
	ns := newNamespace(t)
	q := testutil.NewTaskQueue(ns, "team", 1)
	must(t, k8s.Create(ctx, q))
	task := newTask(ns, "a", manual, testutil.Queue("team"))
	must(t, k8s.Create(ctx, task))
	before := getTask(t, task) // as the cache may still show it: not yet in line
	job := jobs.Name(before, runs.OneShot, 1)

	// Its first pass put it in line, and the queue admitted it.
	inLine := before.DeepCopy()
	inLine.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: job, Since: metav1.NewMicroTime(fakeClock.Now())}}
	must(t, k8s.Status().Update(ctx, inLine))
	eventually(t, "the record lists a's attempt", func() (bool, string) {
		stored := getQueue(t, q)
		stored.Status.Admitted, stored.Status.Running, stored.Status.ObservedGeneration = []string{job}, 1, stored.Generation
		err := k8s.Status().Update(ctx, stored)
		return err == nil, errString(err)
	})
	cached := &v1alpha1.TaskQueue{}
	waitManualCache(t, "the record", client.ObjectKeyFromObject(q), cached, func() bool { return slices.Equal(cached.Status.Admitted, []string{job}) })

	// The pass the admission brings reads the Task from before the line.
	r := manualReconciler(staleTask{Client: manualClient, task: before})
	// (Its status write is refused, the stored Task being newer: a quiet
	// requeue, as for any conflict.)
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)}); err != nil {
		t.Fatalf("the pass: %v", err)
	}
	js := jobsOf(t, task)
	if len(js) != 1 || js[0].Name != job {
		var names []string
		for _, j := range js {
			names = append(names, j.Name)
		}
		t.Fatalf("after the pass the admission brought, Jobs %v; want the admitted attempt's %s", names, job)
	}
}

func TestARetryWaitingOutItsBackoffHoldsNoPlaceInTheQueue(t *testing.T) {
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, testutil.NewTaskQueue(ns, "one", 1)))
	flaky := newTask(ns, "flaky", testutil.Queue("one"), testutil.Retries(1, 30, 30, 2))
	must(t, k8s.Create(ctx, flaky))
	first := waitJobs(t, flaky, 1)[0]
	fakeClock.Step(time.Second)
	other := newTask(ns, "other", testutil.Queue("one"))
	must(t, k8s.Create(ctx, other))
	waitTask(t, other, "queued behind flaky", queuedAs(v1alpha1.ReasonQueued))

	// flaky's attempt fails: while it waits out its 30 s backoff, other runs.
	must(t, testutil.FailJob(ctx, k8s, &first, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	waitTask(t, flaky, "Retrying", phaseIs(v1alpha1.PhaseRetrying))
	waitJobs(t, other, 1)

	// Its retry falls due while other holds the place: it queues, and runs
	// once other is done.
	fakeClock.Step(31 * time.Second)
	poke(t, flaky)
	waitTask(t, flaky, "retry queued", queuedAs(v1alpha1.ReasonQueued))
	completeTaskJob(t, other)
	waitJobs(t, flaky, 2)
}

func TestDeletingAQueuedTaskOrTheQueueLosesNothingElse(t *testing.T) {
	ns := newNamespace(t)
	q := testutil.NewTaskQueue(ns, "team", 1)
	must(t, k8s.Create(ctx, q))
	running := newTask(ns, "running", testutil.Queue("team"))
	must(t, k8s.Create(ctx, running))
	waitJobs(t, running, 1)
	fakeClock.Step(time.Second)
	gone := newTask(ns, "gone", testutil.Queue("team"))
	must(t, k8s.Create(ctx, gone))
	fakeClock.Step(time.Second)
	next := newTask(ns, "next", testutil.Queue("team"))
	must(t, k8s.Create(ctx, next))
	waitTask(t, next, "queued", queuedAs(v1alpha1.ReasonQueued))
	waitQueue(t, q, "2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 2 })

	// The queued Task goes: the next in line takes its turn.
	must(t, k8s.Delete(ctx, gone))
	waitQueue(t, q, "1 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 1 && q.Status.Running == 1 })
	completeTaskJob(t, running)
	waitJobs(t, next, 1)

	// The queue goes: running attempts go on, waiting Tasks say why they wait.
	must(t, k8s.Delete(ctx, getQueue(t, q)))
	later := newTask(ns, "later", testutil.Queue("team"))
	must(t, k8s.Create(ctx, later))
	waitTask(t, later, "QueueNotFound", queuedAs(v1alpha1.ReasonQueueNotFound))
	completeTaskJob(t, next)

	// Re-created, it admits the waiting Task.
	must(t, k8s.Create(ctx, testutil.NewTaskQueue(ns, "team", 1)))
	waitJobs(t, later, 1)
}

func TestAQueuedCronSlotPastItsStartingDeadlineIsSkipped(t *testing.T) {
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, testutil.NewTaskQueue(ns, "one", 1)))
	blocker := newTask(ns, "blocker", testutil.Queue("one"))
	must(t, k8s.Create(ctx, blocker))
	waitJobs(t, blocker, 1)
	cron, _ := scheduledTask(t, ns, "nightly", testutil.Queue("one"), testutil.StartingDeadline(30))

	slot := toSlot(t, cron)
	waitTask(t, cron, "slot queued", queuedAs(v1alpha1.ReasonQueued))
	fakeClock.SetTime(slot.Add(31 * time.Second))
	poke(t, cron)
	skipped := waitTask(t, cron, "slot skipped", func(t *v1alpha1.Task) bool {
		return len(t.Status.Queued) == 0 && t.Status.Phase == v1alpha1.PhaseScheduled
	})
	if len(skipped.Status.History) != 0 {
		t.Fatalf("a skipped slot ran: %+v", skipped.Status.History)
	}
	completeTaskJob(t, blocker)
	if js := jobsOf(t, cron); len(js) != 0 {
		t.Fatalf("the skipped slot got a Job: %s", js[0].Name)
	}
	var evs corev1.EventList
	must(t, k8s.List(ctx, &evs, client.InNamespace(ns), client.MatchingFields{"reason": string(v1alpha1.EventQueuedSlotMissed)}))
	if len(evs.Items) != 1 {
		t.Fatalf("%d QueuedSlotMissed events, want 1", len(evs.Items))
	}
}

func TestQueueReconcilersRacingNeverExceedTheCap(t *testing.T) {
	ns := newNamespace(t)
	jobs := harness.RecordJobs(t, watchClient(t), ns)
	q := testutil.NewTaskQueue(ns, "team", 3)
	must(t, k8s.Create(ctx, q))

	// The record itself, at every write.
	w, err := watchClient(t).Watch(ctx, &v1alpha1.TaskQueueList{}, client.InNamespace(ns))
	must(t, err)
	t.Cleanup(w.Stop)
	// 32 more reconciles of the same queue, from a second cache, race the
	// operator's own after every change of the record: as a second replica
	// or an old leader would.
	second := &taskqueue.Reconciler{Client: manualClient, APIReader: manualReader, Clock: fakeClock, Lines: manualLines}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)}
	var maxRecord sync.Map
	raced := make(chan struct{})
	go func() {
		defer close(raced)
		for ev := range w.ResultChan() {
			tq, ok := ev.Object.(*v1alpha1.TaskQueue)
			if !ok {
				continue
			}
			maxRecord.Store(tq.ResourceVersion, len(tq.Status.Admitted))
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = second.Reconcile(ctx, req)
				}()
			}
			wg.Wait()
		}
	}()

	const n = 15
	var tasks []*v1alpha1.Task
	for i := range n {
		task := newTask(ns, fmt.Sprintf("r%02d", i), testutil.Queue("team"), testutil.Priority(int32(i%3)))
		must(t, k8s.Create(ctx, task))
		tasks = append(tasks, task)
	}
	finished := 0
	eventually(t, "every Task finished", func() (bool, string) {
		var list batchv1.JobList
		must(t, k8s.List(ctx, &list, client.InNamespace(ns)))
		for i := range list.Items {
			if runs.AttemptOf(&list.Items[i], 1).Phase == runs.Active {
				must(t, testutil.CompleteJob(ctx, k8s, &list.Items[i], fakeClock.Now()))
			}
		}
		finished = 0
		for _, task := range tasks {
			if getTask(t, task).Status.Phase == v1alpha1.PhaseSucceeded {
				finished++
			}
		}
		msg := fmt.Sprintf("%d of %d finished", finished, n)
		for _, task := range tasks {
			if got := getTask(t, task); got.Status.Phase != v1alpha1.PhaseSucceeded {
				msg += fmt.Sprintf("; %s: %s queued=%v jobs=%d", task.Name, statusSummary(got), got.Status.Queued, len(jobsOf(t, task)))
			}
		}
		tq := getQueue(t, q)
		msg += fmt.Sprintf("; queue running=%d queued=%d admitted=%v", tq.Status.Running, tq.Status.Queued, tq.Status.Admitted)
		return finished == n, msg
	})
	w.Stop()
	<-raced

	if m := jobs.MaxActive(); m > 3 {
		t.Fatalf("%d attempts were active at once; the queue admits 3", m)
	}
	maxRecord.Range(func(rv, n any) bool {
		if n.(int) > 3 {
			t.Errorf("the admission record at resourceVersion %v lists %d places", rv, n)
		}
		return true
	})
	for _, task := range tasks {
		if js := jobsOf(t, task); len(js) != 1 {
			t.Errorf("%s has %d Jobs", task.Name, len(js))
		}
	}
}

// A Job held suspended by someone else (Kueue creates its Jobs suspended
// and unsuspends them on admission) waits for capacity from the start, not
// StartTimeout; capacityTimeoutSeconds still bounds the wait.
func TestAJobHeldSuspendedBySomeoneElseWaitsForCapacity(t *testing.T) {
	fakeClock.SetTime(time.Now()) // the Job's creation time is the API server's
	ns := newNamespace(t)
	task := newTask(ns, "held", testutil.StartTimeout(5), func(t *v1alpha1.Task) { t.Spec.CapacityTimeoutSeconds = ptr.To[int32](60) })
	must(t, k8s.Create(ctx, task))
	job := waitJobs(t, task, 1)[0]
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.Suspend = ptr.To(true)
	must(t, k8s.Patch(ctx, &job, patch))

	waiting := waitTask(t, task, "WaitingForCapacity", func(t *v1alpha1.Task) bool {
		c := condition(t, v1alpha1.ConditionReady)
		return c != nil && c.Reason == string(v1alpha1.ReasonWaitingForCapacity)
	})
	if c := condition(waiting, v1alpha1.ConditionReady); waiting.Status.Phase != v1alpha1.PhasePending || !strings.Contains(c.Message, "suspended until admitted") {
		t.Fatalf("held: %s; %q", statusSummary(waiting), c.Message)
	}
	fakeClock.Step(10 * time.Second) // past the start timeout: still waiting
	poke(t, task)
	if got := waitTask(t, task, "observed", func(t *v1alpha1.Task) bool { return t.Status.ObservedGeneration == t.Generation }); strings.Contains(got.Status.LastError, "StartTimeout") {
		t.Fatalf("a held Job failed StartTimeout: %s", got.Status.LastError)
	}
	fakeClock.Step(time.Minute) // past the capacity timeout
	poke(t, task)
	failed := waitTask(t, task, "CapacityTimeout", func(t *v1alpha1.Task) bool {
		return strings.Contains(t.Status.LastError, string(v1alpha1.AttemptCapacityTimeout))
	})
	t.Logf("held, then: %s", failed.Status.LastError)
}

// A run-now run is exempt from suspend: on a suspended Task that names a
// queue it waits for admission like any attempt and runs (it waited for
// ever: the queue ignored suspended Tasks).
func TestARunNowOnASuspendedQueuedTaskRuns(t *testing.T) {
	ns := newNamespace(t)
	q := testutil.NewTaskQueue(ns, "team", 1)
	must(t, k8s.Create(ctx, q))
	task := newTask(ns, "paused", testutil.Queue("team"), testutil.Suspend(true))
	must(t, k8s.Create(ctx, task))
	waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("a suspended Task started %d Jobs", n)
	}
	setRunNow(t, task, "ci-7")
	job := waitJobs(t, task, 1)[0]
	if job.Labels[v1alpha1.LabelRun] != runs.RunNowID("ci-7") {
		t.Fatalf("Job %s is of run %s, want the run-now run", job.Name, job.Labels[v1alpha1.LabelRun])
	}
}

// A record can be newer than a replica's view of the Tasks (another
// replica admitted from a line this one has not seen yet): an admitted
// attempt with no Job whose Task this line does not show, but the API
// server does, keeps its place; once its Task stops waiting at the API
// server, the place goes to the head of the line. (Found as a record of 4
// places in a queue of 3 by the racing-reconcilers test.)
func TestAnAdmittedAttemptWhoseTaskTheLineDoesNotShowYetKeepsItsPlace(t *testing.T) {
	// A Task whose whole name is in its Job names is read by that name;
	// one whose name is cut there is found by listing the namespace.
	for _, name := range []string{"a", "ci-build-pipeline-for-the-billing-service-run-000000000012"} {
		t.Run(name, func(t *testing.T) { admittedAttemptKeepsItsPlace(t, name) })
	}
}

func admittedAttemptKeepsItsPlace(t *testing.T, first string) {
	ns := newNamespace(t)
	q := testutil.NewTaskQueue(ns, "team", 1)
	must(t, k8s.Create(ctx, q))
	queueFor := func(name string) (*v1alpha1.Task, string) {
		task := newTask(ns, name, manual, testutil.Queue("team"))
		must(t, k8s.Create(ctx, task))
		stored := getTask(t, task)
		job := jobs.Name(stored, runs.OneShot, 1)
		stored.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: job, Since: metav1.NewMicroTime(fakeClock.Now())}}
		must(t, k8s.Status().Update(ctx, stored))
		return stored, job
	}
	admitted, jobA := queueFor(first)
	_, jobB := queueFor("b")
	// The record lists a's attempt (another replica admitted it).
	eventually(t, "the record lists a's attempt", func() (bool, string) {
		stored := getQueue(t, q)
		stored.Status.Admitted, stored.Status.Running, stored.Status.ObservedGeneration = []string{jobA}, 1, stored.Generation
		err := k8s.Status().Update(ctx, stored)
		return err == nil, errString(err)
	})
	cached := &v1alpha1.TaskQueue{}
	waitManualCache(t, "the record", client.ObjectKeyFromObject(q), cached, func() bool { return slices.Equal(cached.Status.Admitted, []string{jobA}) })

	// This replica's line shows b waiting, not a.
	lines := waitline.New()
	lines.Put(getTask(t, &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}))
	queues := &taskqueue.Reconciler{Client: manualClient, APIReader: manualReader, Clock: fakeClock, Lines: lines}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)}
	eventually(t, "a queue pass", func() (bool, string) {
		_, err := queues.Reconcile(ctx, req)
		return err == nil, errString(err)
	})
	if got := getQueue(t, q).Status.Admitted; !slices.Equal(got, []string{jobA}) {
		t.Fatalf("the record after the pass: %v, want a's place kept %v", got, []string{jobA})
	}

	// a gives its attempt up (at the API server only: the line still
	// does not show a): the place goes to b.
	admitted = getTask(t, admitted)
	admitted.Status.Queued = nil
	must(t, k8s.Status().Update(ctx, admitted))
	eventually(t, "b admitted in a's place", func() (bool, string) {
		_, err := queues.Reconcile(ctx, req)
		got := getQueue(t, q).Status.Admitted
		return slices.Equal(got, []string{jobB}), fmt.Sprintf("record %v, pass error %s", got, errString(err))
	})
}

// staleJobs is a cache that shows Jobs as they were: its Job lists answer
// jobs, whatever they ask.
type staleJobs struct {
	client.Client
	jobs []batchv1.Job
}

func (s staleJobs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*batchv1.JobList); ok {
		l.Items = slices.Clone(s.jobs)
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// A Job the record does not list is adopted only while it holds a place at
// the API server: a cache that still shows it running after it finished
// (and its place was given on) does not put one place too many in the
// record.
func TestAFinishedJobAStaleCacheShowsRunningIsNotAdopted(t *testing.T) {
	ns := newNamespace(t)
	q := testutil.NewTaskQueue(ns, "team", 1)
	must(t, k8s.Create(ctx, q))
	owner := newTask(ns, "moved-in", manual)
	must(t, k8s.Create(ctx, owner))
	owner = getTask(t, owner)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: jobs.Name(owner, runs.OneShot, 1), Labels: map[string]string{v1alpha1.LabelQueue: "team"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "run", Image: "busybox:1.37"}}}}},
	}
	must(t, k8s.Create(ctx, job))
	running := getJob(t, job).DeepCopy() // what the stale cache keeps showing
	must(t, testutil.CompleteJob(ctx, k8s, getJob(t, job), fakeClock.Now()))

	waiting := newTask(ns, "next", manual, testutil.Queue("team"))
	must(t, k8s.Create(ctx, waiting))
	waiting = getTask(t, waiting)
	next := jobs.Name(waiting, runs.OneShot, 1)
	waiting.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: next, Since: metav1.NewMicroTime(fakeClock.Now())}}
	must(t, k8s.Status().Update(ctx, waiting))
	lines := waitline.New()
	lines.Put(getTask(t, waiting))
	// The record as the operator's own passes leave it (they may adopt the
	// Job while it runs, then release it).
	waitQueue(t, q, "the record empty", func(tq *v1alpha1.TaskQueue) bool {
		return tq.Status.ObservedGeneration > 0 && len(tq.Status.Admitted) == 0
	})
	cached := &v1alpha1.TaskQueue{}
	waitManualCache(t, "the empty record", client.ObjectKeyFromObject(q), cached, func() bool {
		return cached.Status.ObservedGeneration > 0 && len(cached.Status.Admitted) == 0
	})

	queues := &taskqueue.Reconciler{Client: staleJobs{manualClient, []batchv1.Job{*running}}, APIReader: manualReader, Clock: fakeClock, Lines: lines}
	eventually(t, "a queue pass", func() (bool, string) {
		_, err := queues.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		return err == nil, errString(err)
	})
	if got := getQueue(t, q).Status.Admitted; !slices.Equal(got, []string{next}) {
		t.Fatalf("the record after the pass: %v, want the waiting attempt admitted %v", got, []string{next})
	}
}
