package taskqueue_test

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
	suite "github.com/taskops/task-operator/internal/testutil/opsuite"
	"github.com/taskops/task-operator/internal/waitline"
	"github.com/taskops/task-operator/test/harness"
)

func TestAQueueRunsAtMostMaxRunningAttemptsHigherPriorityFirstThenFirstComeFirstServed(t *testing.T) {
	ns, jobs, q := suspendedQueue(t, 2)

	// Three Tasks arrive one after the other, then an urgent one; the
	// suspended queue holds them all in line.
	var tasks []*v1alpha1.Task
	for i, name := range []string{"a", "b", "c", "d", "urgent"} {
		prio := int32(0)
		if name == "urgent" {
			prio = 10
		}
		task := suite.CreateTask(t, ns, name, testutil.Queue("team"), testutil.Priority(prio))
		queuedTask := suite.WaitTask(t, task, "queued behind a suspended queue", suite.QueuedAs(v1alpha1.ReasonQueueSuspended))
		if i == 0 {
			suite.AssertConditions(t, queuedTask, suite.U, suite.F, suite.T, suite.F)
			suite.AssertKstatus(t, queuedTask, kstatus.InProgressStatus)
			if c := suite.Condition(queuedTask, v1alpha1.ConditionFinished); c == nil || c.Status != suite.F {
				t.Fatalf("Finished while queued: %+v", c)
			}
		}
		tasks = append(tasks, task)
		suite.Clock.Step(time.Second)
	}
	suite.WaitQueue(t, q, "5 queued, none running", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 5 && q.Status.Running == 0 })
	if len(jobs.Order()) != 0 {
		t.Fatalf("a suspended queue admitted %v", jobs.Order())
	}

	// Resumed: the urgent Task and the first to come run, the rest wait.
	suite.Edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.Suspend = nil })
	suite.WaitQueue(t, q, "2 running, 3 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 2 && q.Status.Queued == 3 })
	suite.WaitJobs(t, tasks[4], 1)
	suite.WaitJobs(t, tasks[0], 1)
	suite.WaitTask(t, tasks[1], "b still queued", suite.QueuedAs(v1alpha1.ReasonQueued))

	// Each finished attempt frees its place for the head of the line.
	suite.CompleteTaskJob(t, tasks[4])
	suite.WaitJobs(t, tasks[1], 1)
	suite.CompleteTaskJob(t, tasks[0])
	suite.WaitJobs(t, tasks[2], 1)
	suite.CompleteTaskJob(t, tasks[1])
	suite.WaitJobs(t, tasks[3], 1)
	suite.CompleteTaskJob(t, tasks[2])
	suite.CompleteTaskJob(t, tasks[3])
	suite.WaitQueue(t, q, "empty", func(q *v1alpha1.TaskQueue) bool {
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
	wantEvents(t, ns, v1alpha1.EventAdmitted, 5)
	// Joining the line sends no event (the status says it); they would
	// have been sent before the Admitted ones counted above.
	wantEvents(t, ns, v1alpha1.ReasonQueued, 0)
}

func TestATaskNamingAMissingQueueWaitsAndStartsOnceTheQueueExists(t *testing.T) {
	ns := suite.NewNamespace(t)
	task := suite.CreateTask(t, ns, "early", testutil.Queue("later"))
	waiting := suite.WaitTask(t, task, "QueueNotFound", suite.QueuedAs(v1alpha1.ReasonQueueNotFound))
	if c := suite.Condition(waiting, v1alpha1.ConditionReady); c.Status != suite.U {
		t.Fatalf("Ready %s while the queue is missing", c.Status)
	}
	if len(suite.JobsOf(t, task)) != 0 {
		t.Fatal("a Job was created without a queue to admit it")
	}
	suite.CreateQueue(t, ns, "later", 1)
	suite.WaitJobs(t, task, 1)
	suite.WaitTask(t, task, "Running", suite.PhaseIs(v1alpha1.PhaseRunning))
}

func TestLoweringMaxRunningStopsNothingAndRaisingItAdmitsAtOnce(t *testing.T) {
	// All five join the line before anything is admitted. A queue admits
	// only what is in its line, and each Task joins it with its first
	// pass: Tasks created at once join in whatever order their first
	// passes end, so which three run first would be up to chance
	// (docs/queues.md, "Order and starvation").
	ns, jobs, q := suspendedQueue(t, 3)
	var tasks []*v1alpha1.Task
	for i := range 5 {
		task := suite.CreateTask(t, ns, fmt.Sprintf("t%d", i), testutil.Queue("team"))
		suite.WaitTask(t, task, "in line behind the suspended queue", suite.QueuedAs(v1alpha1.ReasonQueueSuspended))
		tasks = append(tasks, task)
		suite.Clock.Step(time.Second)
	}
	suite.Edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.Suspend = nil })
	suite.WaitQueue(t, q, "3 running, 2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 3 && q.Status.Queued == 2 })
	for _, task := range tasks[:3] {
		suite.WaitJobsAtOnce(t, task, 1) // a place is held from admission; its Job follows on that event
	}

	lowered := suite.Edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.MaxRunning = 1 })
	suite.WaitQueue(t, q, "generation seen", func(got *v1alpha1.TaskQueue) bool { return got.Status.ObservedGeneration == lowered.Generation })
	for _, task := range tasks[:3] {
		if js := suite.JobsOf(t, task); len(js) != 1 || runs.AttemptOf(&js[0], 1).Phase != runs.Active {
			t.Fatalf("%s: lowering maxRunning touched its running attempt", task.Name)
		}
	}
	// Two finish: still one running, so nothing is admitted below the new cap.
	suite.CompleteTaskJob(t, tasks[0])
	suite.CompleteTaskJob(t, tasks[1])
	suite.WaitQueue(t, q, "1 running, 2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Running == 1 && q.Status.Queued == 2 })
	if len(suite.JobsOf(t, tasks[3])) != 0 {
		t.Fatal("admitted while at the lowered cap")
	}

	suite.Edit(t, q, func(q *v1alpha1.TaskQueue) { q.Spec.MaxRunning = 3 })
	suite.WaitJobsAtOnce(t, tasks[3], 1)
	suite.WaitJobsAtOnce(t, tasks[4], 1)
	if m := jobs.MaxActive(); m > 3 {
		t.Fatalf("%d attempts active at once", m)
	}
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
	ns := suite.NewNamespace(t)
	q := suite.CreateQueue(t, ns, "team", 1)
	task := suite.CreateTask(t, ns, "a", suite.Manual, testutil.Queue("team"))
	before := suite.GetTask(t, task) // as the cache may still show it: not yet in line
	job := jobs.Name(before, runs.OneShot, 1)

	// Its first pass put it in line, and the queue admitted it.
	inLine := before.DeepCopy()
	inLine.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: job, Since: metav1.NewMicroTime(suite.Clock.Now())}}
	suite.Must(t, suite.K8s.Status().Update(suite.Ctx, inLine))
	recordAdmitted(t, q, job)

	// The pass the admission brings reads the Task from before the line.
	r := suite.ManualReconciler(suite.StaleTask{Client: suite.ManualClient, Task: before})
	// (Its status write is refused, the stored Task being newer: a quiet
	// requeue, as for any conflict.)
	if _, err := r.Reconcile(suite.Ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)}); err != nil {
		t.Fatalf("the pass: %v", err)
	}
	js := suite.JobsOf(t, task)
	if len(js) != 1 || js[0].Name != job {
		var names []string
		for _, j := range js {
			names = append(names, j.Name)
		}
		t.Fatalf("after the pass the admission brought, Jobs %v; want the admitted attempt's %s", names, job)
	}
}

func TestARetryWaitingOutItsBackoffHoldsNoPlaceInTheQueue(t *testing.T) {
	ns := suite.NewNamespace(t)
	suite.CreateQueue(t, ns, "one", 1)
	flaky := suite.CreateTask(t, ns, "flaky", testutil.Queue("one"), testutil.Retries(1, 30, 30, 2))
	first := suite.WaitJobs(t, flaky, 1)[0]
	suite.Clock.Step(time.Second)
	other := suite.CreateTask(t, ns, "other", testutil.Queue("one"))
	suite.WaitTask(t, other, "queued behind flaky", suite.QueuedAs(v1alpha1.ReasonQueued))

	// flaky's attempt fails: while it waits out its 30 s backoff, other runs.
	suite.Must(t, testutil.FailJob(suite.Ctx, suite.K8s, &first, suite.Clock.Now(), "BackoffLimitExceeded", "exit 3"))
	suite.WaitTask(t, flaky, "Retrying", suite.PhaseIs(v1alpha1.PhaseRetrying))
	suite.WaitJobs(t, other, 1)

	// Its retry falls due while other holds the place: it queues, and runs
	// once other is done.
	suite.Clock.Step(31 * time.Second)
	suite.Poke(t, flaky)
	suite.WaitTask(t, flaky, "retry queued", suite.QueuedAs(v1alpha1.ReasonQueued))
	suite.CompleteTaskJob(t, other)
	suite.WaitJobs(t, flaky, 2)
}

func TestDeletingAQueuedTaskOrTheQueueLosesNothingElse(t *testing.T) {
	ns := suite.NewNamespace(t)
	q := suite.CreateQueue(t, ns, "team", 1)
	running := suite.CreateTask(t, ns, "running", testutil.Queue("team"))
	suite.WaitJobs(t, running, 1)
	suite.Clock.Step(time.Second)
	gone := suite.CreateTask(t, ns, "gone", testutil.Queue("team"))
	suite.Clock.Step(time.Second)
	next := suite.CreateTask(t, ns, "next", testutil.Queue("team"))
	suite.WaitTask(t, next, "queued", suite.QueuedAs(v1alpha1.ReasonQueued))
	suite.WaitQueue(t, q, "2 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 2 })

	// The queued Task goes: the next in line takes its turn.
	suite.Must(t, suite.K8s.Delete(suite.Ctx, gone))
	suite.WaitQueue(t, q, "1 queued", func(q *v1alpha1.TaskQueue) bool { return q.Status.Queued == 1 && q.Status.Running == 1 })
	suite.CompleteTaskJob(t, running)
	suite.WaitJobs(t, next, 1)

	// The queue goes: running attempts go on, waiting Tasks say why they wait.
	suite.Must(t, suite.K8s.Delete(suite.Ctx, suite.GetQueue(t, q)))
	later := suite.CreateTask(t, ns, "later", testutil.Queue("team"))
	suite.WaitTask(t, later, "QueueNotFound", suite.QueuedAs(v1alpha1.ReasonQueueNotFound))
	suite.CompleteTaskJob(t, next)

	// Re-created, it admits the waiting Task.
	suite.CreateQueue(t, ns, "team", 1)
	suite.WaitJobs(t, later, 1)
}

func TestAQueuedCronSlotPastItsStartingDeadlineIsSkipped(t *testing.T) {
	ns := suite.NewNamespace(t)
	suite.CreateQueue(t, ns, "one", 1)
	blocker := suite.CreateTask(t, ns, "blocker", testutil.Queue("one"))
	suite.WaitJobs(t, blocker, 1)
	cron, _ := suite.ScheduledTask(t, ns, "nightly", testutil.Queue("one"), testutil.StartingDeadline(30))

	slot := suite.ToSlot(t, cron)
	suite.WaitTask(t, cron, "slot queued", suite.QueuedAs(v1alpha1.ReasonQueued))
	suite.Clock.SetTime(slot.Add(31 * time.Second))
	suite.Poke(t, cron)
	skipped := suite.WaitTask(t, cron, "slot skipped", func(t *v1alpha1.Task) bool {
		return len(t.Status.Queued) == 0 && t.Status.Phase == v1alpha1.PhaseScheduled
	})
	if len(skipped.Status.History) != 0 {
		t.Fatalf("a skipped slot ran: %+v", skipped.Status.History)
	}
	suite.CompleteTaskJob(t, blocker)
	if js := suite.JobsOf(t, cron); len(js) != 0 {
		t.Fatalf("the skipped slot got a Job: %s", js[0].Name)
	}
	wantEvents(t, ns, v1alpha1.EventQueuedSlotMissed, 1)
}

func TestQueueReconcilersRacingNeverExceedTheCap(t *testing.T) {
	ns := suite.NewNamespace(t)
	jobs := harness.RecordJobs(t, suite.WatchClient(t), ns)
	q := suite.CreateQueue(t, ns, "team", 3)

	// The record itself, at every write.
	w, err := suite.WatchClient(t).Watch(suite.Ctx, &v1alpha1.TaskQueueList{}, client.InNamespace(ns))
	suite.Must(t, err)
	t.Cleanup(w.Stop)
	// 32 more reconciles of the same queue, from a second cache, race the
	// operator's own after every change of the record: as a second replica
	// or an old leader would.
	second := &taskqueue.Reconciler{Client: suite.ManualClient, APIReader: suite.ManualReader, Clock: suite.Clock, Lines: suite.ManualLines}
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
					_, _ = second.Reconcile(suite.Ctx, req)
				}()
			}
			wg.Wait()
		}
	}()

	const n = 15
	var tasks []*v1alpha1.Task
	for i := range n {
		task := suite.CreateTask(t, ns, fmt.Sprintf("r%02d", i), testutil.Queue("team"), testutil.Priority(int32(i%3)))
		tasks = append(tasks, task)
	}
	finished := 0
	suite.Eventually(t, "every Task finished", func() (bool, string) {
		var list batchv1.JobList
		suite.Must(t, suite.K8s.List(suite.Ctx, &list, client.InNamespace(ns)))
		for i := range list.Items {
			if runs.AttemptOf(&list.Items[i], 1).Phase == runs.Active {
				suite.Must(t, testutil.CompleteJob(suite.Ctx, suite.K8s, &list.Items[i], suite.Clock.Now()))
			}
		}
		finished = 0
		for _, task := range tasks {
			if suite.GetTask(t, task).Status.Phase == v1alpha1.PhaseSucceeded {
				finished++
			}
		}
		msg := fmt.Sprintf("%d of %d finished", finished, n)
		for _, task := range tasks {
			if got := suite.GetTask(t, task); got.Status.Phase != v1alpha1.PhaseSucceeded {
				msg += fmt.Sprintf("; %s: %s queued=%v jobs=%d", task.Name, suite.StatusSummary(got), got.Status.Queued, len(suite.JobsOf(t, task)))
			}
		}
		tq := suite.GetQueue(t, q)
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
		if js := suite.JobsOf(t, task); len(js) != 1 {
			t.Errorf("%s has %d Jobs", task.Name, len(js))
		}
	}
}

// A Job held suspended by someone else (Kueue creates its Jobs suspended
// and unsuspends them on admission) waits for capacity from the start, not
// StartTimeout; capacityTimeoutSeconds still bounds the wait.
func TestAJobHeldSuspendedBySomeoneElseWaitsForCapacity(t *testing.T) {
	suite.Clock.SetTime(time.Now()) // the Job's creation time is the API server's
	ns := suite.NewNamespace(t)
	task := suite.CreateTask(t, ns, "held", testutil.StartTimeout(5), func(t *v1alpha1.Task) { t.Spec.CapacityTimeoutSeconds = ptr.To[int32](60) })
	job := suite.WaitJobs(t, task, 1)[0]
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.Suspend = ptr.To(true)
	suite.Must(t, suite.K8s.Patch(suite.Ctx, &job, patch))

	waiting := suite.WaitTask(t, task, "WaitingForCapacity", func(t *v1alpha1.Task) bool {
		c := suite.Condition(t, v1alpha1.ConditionReady)
		return c != nil && c.Reason == string(v1alpha1.ReasonWaitingForCapacity)
	})
	if c := suite.Condition(waiting, v1alpha1.ConditionReady); waiting.Status.Phase != v1alpha1.PhasePending || !strings.Contains(c.Message, "suspended until admitted") {
		t.Fatalf("held: %s; %q", suite.StatusSummary(waiting), c.Message)
	}
	suite.Clock.Step(10 * time.Second) // past the start timeout: still waiting
	suite.Poke(t, task)
	if got := suite.WaitTask(t, task, "observed", func(t *v1alpha1.Task) bool { return t.Status.ObservedGeneration == t.Generation }); strings.Contains(got.Status.LastError, "StartTimeout") {
		t.Fatalf("a held Job failed StartTimeout: %s", got.Status.LastError)
	}
	suite.Clock.Step(time.Minute) // past the capacity timeout
	suite.Poke(t, task)
	failed := suite.WaitTask(t, task, "CapacityTimeout", func(t *v1alpha1.Task) bool {
		return strings.Contains(t.Status.LastError, string(v1alpha1.AttemptCapacityTimeout))
	})
	t.Logf("held, then: %s", failed.Status.LastError)
}

// A run-now run is exempt from suspend: on a suspended Task that names a
// queue it waits for admission like any attempt and runs (it waited for
// ever: the queue ignored suspended Tasks).
func TestARunNowOnASuspendedQueuedTaskRuns(t *testing.T) {
	ns := suite.NewNamespace(t)
	suite.CreateQueue(t, ns, "team", 1)
	task := suite.CreateTask(t, ns, "paused", testutil.Queue("team"), testutil.Suspend(true))
	suite.WaitTask(t, task, "phase Suspended", suite.PhaseIs(v1alpha1.PhaseSuspended))
	if n := len(suite.JobsOf(t, task)); n != 0 {
		t.Fatalf("a suspended Task started %d Jobs", n)
	}
	suite.SetRunNow(t, task, "ci-7")
	job := suite.WaitJobs(t, task, 1)[0]
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
	ns := suite.NewNamespace(t)
	q := suite.CreateQueue(t, ns, "team", 1)
	queueFor := func(name string) (*v1alpha1.Task, string) {
		task := suite.CreateTask(t, ns, name, suite.Manual, testutil.Queue("team"))
		stored := suite.GetTask(t, task)
		job := jobs.Name(stored, runs.OneShot, 1)
		stored.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: job, Since: metav1.NewMicroTime(suite.Clock.Now())}}
		suite.Must(t, suite.K8s.Status().Update(suite.Ctx, stored))
		return stored, job
	}
	admitted, jobA := queueFor(first)
	_, jobB := queueFor("b")
	// The record lists a's attempt (another replica admitted it).
	recordAdmitted(t, q, jobA)

	// This replica's line shows b waiting, not a.
	lines := waitline.New()
	lines.Put(suite.GetTask(t, &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}))
	queues := &taskqueue.Reconciler{Client: suite.ManualClient, APIReader: suite.ManualReader, Clock: suite.Clock, Lines: lines}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)}
	suite.Eventually(t, "a queue pass", func() (bool, string) {
		_, err := queues.Reconcile(suite.Ctx, req)
		return err == nil, suite.ErrString(err)
	})
	if got := suite.GetQueue(t, q).Status.Admitted; !slices.Equal(got, []string{jobA}) {
		t.Fatalf("the record after the pass: %v, want a's place kept %v", got, []string{jobA})
	}

	// a gives its attempt up (at the API server only: the line still
	// does not show a): the place goes to b.
	admitted = suite.GetTask(t, admitted)
	admitted.Status.Queued = nil
	suite.Must(t, suite.K8s.Status().Update(suite.Ctx, admitted))
	suite.Eventually(t, "b admitted in a's place", func() (bool, string) {
		_, err := queues.Reconcile(suite.Ctx, req)
		got := suite.GetQueue(t, q).Status.Admitted
		return slices.Equal(got, []string{jobB}), fmt.Sprintf("record %v, pass error %s", got, suite.ErrString(err))
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
	ns := suite.NewNamespace(t)
	q := suite.CreateQueue(t, ns, "team", 1)
	owner := suite.CreateTask(t, ns, "moved-in", suite.Manual)
	owner = suite.GetTask(t, owner)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: jobs.Name(owner, runs.OneShot, 1), Labels: map[string]string{v1alpha1.LabelQueue: "team"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "run", Image: "busybox:1.37"}}}}},
	}
	suite.Must(t, suite.K8s.Create(suite.Ctx, job))
	running := suite.GetJob(t, job).DeepCopy() // what the stale cache keeps showing
	suite.Must(t, testutil.CompleteJob(suite.Ctx, suite.K8s, suite.GetJob(t, job), suite.Clock.Now()))

	waiting := suite.CreateTask(t, ns, "next", suite.Manual, testutil.Queue("team"))
	waiting = suite.GetTask(t, waiting)
	next := jobs.Name(waiting, runs.OneShot, 1)
	waiting.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: runs.OneShot, Attempt: 1, JobName: next, Since: metav1.NewMicroTime(suite.Clock.Now())}}
	suite.Must(t, suite.K8s.Status().Update(suite.Ctx, waiting))
	lines := waitline.New()
	lines.Put(suite.GetTask(t, waiting))
	// The record as the operator's own passes leave it (they may adopt the
	// Job while it runs, then release it).
	suite.WaitQueue(t, q, "the record empty", func(tq *v1alpha1.TaskQueue) bool {
		return tq.Status.ObservedGeneration > 0 && len(tq.Status.Admitted) == 0
	})
	cached := &v1alpha1.TaskQueue{}
	suite.WaitManualCache(t, "the empty record", client.ObjectKeyFromObject(q), cached, func() bool {
		return cached.Status.ObservedGeneration > 0 && len(cached.Status.Admitted) == 0
	})

	queues := &taskqueue.Reconciler{Client: staleJobs{suite.ManualClient, []batchv1.Job{*running}}, APIReader: suite.ManualReader, Clock: suite.Clock, Lines: lines}
	suite.Eventually(t, "a queue pass", func() (bool, string) {
		_, err := queues.Reconcile(suite.Ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		return err == nil, suite.ErrString(err)
	})
	if got := suite.GetQueue(t, q).Status.Admitted; !slices.Equal(got, []string{next}) {
		t.Fatalf("the record after the pass: %v, want the waiting attempt admitted %v", got, []string{next})
	}
}

// suspendedQueue makes a namespace with a suspended TaskQueue "team" of
// maxRunning and a recorder of its Jobs: Tasks wait in its line until the
// test resumes it.
func suspendedQueue(t *testing.T, maxRunning int32) (string, *harness.JobRecorder, *v1alpha1.TaskQueue) {
	t.Helper()
	ns := suite.NewNamespace(t)
	jobs := harness.RecordJobs(t, suite.WatchClient(t), ns)
	q := testutil.NewTaskQueue(ns, "team", maxRunning)
	q.Spec.Suspend = ptr.To(true)
	suite.Must(t, suite.K8s.Create(suite.Ctx, q))
	return ns, jobs, q
}

// wantEvents checks that the namespace has n Events of reason (the
// operator's recorder aggregates none of these: each is one decision).
func wantEvents(t *testing.T, ns string, reason v1alpha1.Reason, n int) {
	t.Helper()
	var evs corev1.EventList
	suite.Must(t, suite.K8s.List(suite.Ctx, &evs, client.InNamespace(ns), client.MatchingFields{"reason": string(reason)}))
	if len(evs.Items) != n {
		t.Fatalf("%d %s events, want %d", len(evs.Items), reason, n)
	}
}

// recordAdmitted writes the queue's record as one admitted attempt, job,
// running (as another replica's admission would), and waits until the
// hand-driven reconcilers' cache shows it.
func recordAdmitted(t *testing.T, q *v1alpha1.TaskQueue, job string) {
	t.Helper()
	suite.Eventually(t, "the record lists "+job, func() (bool, string) {
		stored := suite.GetQueue(t, q)
		stored.Status.Admitted, stored.Status.Running, stored.Status.ObservedGeneration = []string{job}, 1, stored.Generation
		err := suite.K8s.Status().Update(suite.Ctx, stored)
		return err == nil, suite.ErrString(err)
	})
	cached := &v1alpha1.TaskQueue{}
	suite.WaitManualCache(t, "the record", client.ObjectKeyFromObject(q), cached, func() bool { return slices.Equal(cached.Status.Admitted, []string{job}) })
}
