//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// violation reports a breach of the contract. (Findings 1-3 of
// docs/reliability.md were logged as known violations until they were
// fixed; now any breach fails the run.)
func violation(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf("CONTRACT VIOLATION: %s", fmt.Sprintf(format, args...))
}

// jobCase is one way a user can touch a child Job, and what the operator
// does about it.
type jobCase struct {
	name string
	what string
	opts []testutil.TaskOpt
	// ready says when to act.
	ready func(task *v1alpha1.Task, jobs []batchv1.Job) bool
	// act touches the Job(s); it returns the Job it touched.
	act func(ctx context.Context, jobs []batchv1.Job) (string, error)
	// check judges the Task and the Jobs seen once things settled.
	check func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen []batchv1.Job, existing []batchv1.Job)

	actedAt time.Time
	touched string
}

func activeJob(jobs []batchv1.Job, attempt string) *batchv1.Job {
	for i := range jobs {
		j := &jobs[i]
		if j.Labels[v1alpha1.LabelAttempt] == attempt && harness.JobCondition(j, batchv1.JobComplete) == nil &&
			harness.JobCondition(j, batchv1.JobFailed) == nil && j.Status.Active > 0 {
			return j
		}
	}
	return nil
}

func jobOfAttempt(jobs []batchv1.Job, attempt string) *batchv1.Job {
	for i := range jobs {
		if jobs[i].Labels[v1alpha1.LabelAttempt] == attempt {
			return &jobs[i]
		}
	}
	return nil
}

func deleteJob(attempt string) func(ctx context.Context, jobs []batchv1.Job) (string, error) {
	return func(ctx context.Context, jobs []batchv1.Job) (string, error) {
		j := jobOfAttempt(jobs, attempt)
		if j == nil {
			return "", fmt.Errorf("no Job of attempt %s", attempt)
		}
		// What `kubectl delete job` does: background propagation.
		return j.Name, s.c.Delete(ctx, j, client.PropagationPolicy("Background"))
	}
}

func relabelJob(attempt, key, value string) func(ctx context.Context, jobs []batchv1.Job) (string, error) {
	return func(ctx context.Context, jobs []batchv1.Job) (string, error) {
		j := jobOfAttempt(jobs, attempt)
		if j == nil {
			return "", fmt.Errorf("no Job of attempt %s", attempt)
		}
		v := any(value)
		if value == "" {
			v = nil // remove the label
		}
		patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}}
		return j.Name, s.c.Patch(ctx, j, client.RawPatch(types.MergePatchType, mustJSON(patch)))
	}
}

// jobSummary is "name(uid)" per Job of a Task, oldest first.
func jobSummary(jobs []batchv1.Job) string {
	var parts []string
	for _, j := range jobs {
		state := "active"
		switch {
		case harness.JobCondition(&j, batchv1.JobComplete) != nil:
			state = "complete"
		case harness.JobCondition(&j, batchv1.JobFailed) != nil:
			state = "failed"
		}
		parts = append(parts, fmt.Sprintf("%s[attempt %s, uid %s, %s]", j.Name, j.Labels[v1alpha1.LabelAttempt], string(j.UID)[:8], state))
	}
	return strings.Join(parts, " ")
}

func ofTask(jobs []batchv1.Job, task string) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		if j.Labels[v1alpha1.LabelTask] == task || strings.HasPrefix(j.Name, task+"-") {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].CreationTimestamp.Before(&out[k].CreationTimestamp) })
	return out
}

// Scenario 6: a user deletes or relabels a child Job. Each case below
// documents the operator's one reaction (docs/reliability.md); the
// reactions that breach the contract are reported as known violations.
func TestS06JobDeletedOrRelabelled(t *testing.T) {
	ns := s.newNamespace(t, "rel-jobs", false)
	op := s.startOperator(t, "op", false)
	rec := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)

	phase := func(ps ...v1alpha1.TaskPhase) func(*v1alpha1.Task, []batchv1.Job) bool {
		return func(task *v1alpha1.Task, _ []batchv1.Job) bool {
			for _, p := range ps {
				if task.Status.Phase == p {
					return true
				}
			}
			return false
		}
	}
	runningAttempt := func(attempt string) func(*v1alpha1.Task, []batchv1.Job) bool {
		return func(task *v1alpha1.Task, jobs []batchv1.Job) bool {
			return task.Status.Phase == v1alpha1.PhaseRunning && activeJob(jobs, attempt) != nil
		}
	}
	// ends checks the documented end of a case: the Task's phase and
	// attempts, and how many Jobs were ever seen, one per attempt.
	ends := func(phase v1alpha1.TaskPhase, attempts int32, jobs int) func(*testing.T, *jobCase, *v1alpha1.Task, []batchv1.Job, []batchv1.Job) {
		return func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen, existing []batchv1.Job) {
			st := task.Status
			js := ofTask(seen, c.name)
			perAttempt := map[string]int{}
			for _, j := range js {
				perAttempt[j.Labels[v1alpha1.LabelAttempt]]++
			}
			twice := false
			for _, n := range perAttempt {
				twice = twice || n > 1
			}
			if !finalPhase(st.Phase) {
				violation(t, "%s (%s): the Task never finishes: phase %s (%q), attempts %d, lastJobName %s (touched: %s), active %v, %s after the action; contract: every one-shot Task ends Succeeded or Failed",
					c.name, c.what, st.Phase, harness.Cond(task, v1alpha1.ConditionReady).Message, st.Attempts, st.LastJobName, c.touched, st.Active, harness.Secs(time.Since(c.actedAt)))
				return
			}
			if st.Phase != phase || st.Attempts != attempts || len(js) != jobs || twice {
				t.Errorf("%s: documented: %s after %d attempt(s), %d Job(s) seen, one per attempt; got %s after %d, Jobs seen: %s",
					c.name, phase, attempts, jobs, st.Phase, st.Attempts, jobSummary(js))
			}
		}
	}
	cases := []*jobCase{
		{
			name: "del-active", what: "the active Job of attempt 1, the run's only Job, deleted",
			opts: []testutil.TaskOpt{testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimDuration, "8")},
			// The deleted attempt failed (JobDeleted); attempt 2 starts at
			// once and succeeds.
			ready: runningAttempt("1"), act: deleteJob("1"), check: ends(v1alpha1.PhaseSucceeded, 2, 2),
		},
		{
			name: "del-backoff", what: "the failed Job of attempt 1 deleted while the Task waits out its backoff",
			opts: []testutil.TaskOpt{testutil.Retries(2, 15, 15, 1), testutil.PodAnnotations(harness.SimExitCode, "1")},
			// Attempt 2 starts at once (the deletion skips the backoff), then
			// 2 and 3 fail like 1: Failed after 3 attempts.
			ready: phase(v1alpha1.PhaseRetrying), act: deleteJob("1"), check: ends(v1alpha1.PhaseFailed, 3, 3),
		},
		{
			name: "del-second", what: "the active Job of attempt 2 deleted (attempt 1's failed Job kept)",
			opts: []testutil.TaskOpt{testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimExitCode, "1", harness.SimDuration, "5")},
			// Attempt 2 counts as failed (JobDeleted); attempt 3 starts at
			// once and fails like 1: Failed after 3 attempts, 3 Jobs.
			ready: runningAttempt("2"), act: deleteJob("2"), check: ends(v1alpha1.PhaseFailed, 3, 3),
		},
		{
			name: "del-finished", what: "the Job of a Succeeded Task deleted",
			opts:  nil,
			ready: phase(v1alpha1.PhaseSucceeded), act: deleteJob("1"),
			check: func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen, existing []batchv1.Job) {
				// Observed: nothing: the status remembers the finished run.
				st := task.Status
				if st.Phase != v1alpha1.PhaseSucceeded || st.Attempts != 1 || len(ofTask(seen, c.name)) != 1 || len(ofTask(existing, c.name)) != 0 {
					t.Errorf("%s: documented: no reaction (Succeeded, 1 attempt, no new Job); got phase %s attempts %d, Jobs seen %s",
						c.name, st.Phase, st.Attempts, jobSummary(ofTask(seen, c.name)))
				}
			},
		},
		{
			name: "unlabel-managed", what: "label app.kubernetes.io/managed-by removed from the active Job of attempt 1",
			opts: []testutil.TaskOpt{testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimDuration, "8")},
			// The operator finds the Job by its deterministic name, puts
			// the label back, and the Job counts: Succeeded, 1 attempt.
			ready: runningAttempt("1"), act: relabelJob("1", v1alpha1.LabelManagedBy, ""),
			check: func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen, existing []batchv1.Job) {
				ends(v1alpha1.PhaseSucceeded, 1, 1)(t, c, task, seen, existing)
				if ex := ofTask(existing, c.name); len(ex) != 1 || ex[0].Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
					t.Errorf("%s: want the label put back on the one Job: %s", c.name, jobSummary(ex))
				}
			},
		},
		{
			name: "relabel-attempt", what: "label batch.taskops.io/attempt of the active Job changed from 1 to 2",
			opts:  []testutil.TaskOpt{testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimDuration, "8")},
			ready: runningAttempt("1"), act: relabelJob("1", v1alpha1.LabelAttempt, "2"),
			check: func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen, existing []batchv1.Job) {
				// Observed: the labels are the record: the Job is taken for
				// attempt 2 and the Task succeeds "on attempt 2" with one
				// Job; no new Job.
				st := task.Status
				if st.Phase != v1alpha1.PhaseSucceeded || len(ofTask(seen, c.name)) != 1 {
					t.Errorf("%s: documented: Succeeded with the one relabelled Job; got phase %s attempts %d, Jobs %s",
						c.name, st.Phase, st.Attempts, jobSummary(ofTask(seen, c.name)))
				}
				if st.Attempts != 1 {
					t.Logf("%s: status.attempts %d, retryCount %d with one Job ever created (the attempt label is taken as the record)", c.name, st.Attempts, st.RetryCount)
				}
			},
		},
		{
			name: "relabel-task", what: "label batch.taskops.io/task of the active Job changed to another name",
			opts:  []testutil.TaskOpt{testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimDuration, "8")},
			ready: runningAttempt("1"), act: relabelJob("1", v1alpha1.LabelTask, "someone-else"),
			check: func(t *testing.T, c *jobCase, task *v1alpha1.Task, seen, existing []batchv1.Job) {
				// Observed: no reaction: Jobs are found by their controller
				// reference, not by this label; the Task succeeds.
				st := task.Status
				if st.Phase != v1alpha1.PhaseSucceeded || st.Attempts != 1 || len(ofTask(seen, c.name)) != 1 {
					t.Errorf("%s: documented: no reaction, Succeeded after 1 attempt; got phase %s attempts %d, Jobs %s",
						c.name, st.Phase, st.Attempts, jobSummary(ofTask(seen, c.name)))
				}
			},
		},
	}
	for _, c := range cases {
		create(t, testutil.NewTask(ns, c.name, c.opts...))
	}
	start := time.Now()
	harness.Eventually(t, 2*time.Minute, "every case to be acted on", note(op), func(ctx context.Context) (bool, string) {
		var list batchv1.JobList
		if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var waiting []string
		for _, c := range cases {
			if !c.actedAt.IsZero() {
				continue
			}
			task, err := harness.GetTask(ctx, s.c, ns, c.name)
			if err != nil {
				return false, err.Error()
			}
			jobs := ofTask(list.Items, c.name)
			if !c.ready(task, jobs) {
				waiting = append(waiting, fmt.Sprintf("%s(%s)", c.name, task.Status.Phase))
				continue
			}
			name, err := c.act(ctx, jobs)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			c.actedAt, c.touched = time.Now(), name
			t.Logf("%s: +%s: %s (%s); the Task was %s with %d attempt(s)", c.name, harness.Secs(time.Since(start)), c.what, name, task.Status.Phase, task.Status.Attempts)
		}
		return len(waiting) == 0, "waiting for " + strings.Join(waiting, " ")
	})
	// Every case should end (the longest: two more failing attempts with a
	// 15 s backoff between them); a Task that does not within the deadline
	// is reported below. Then a quiet window shows no extra Job follows.
	finished := time.Now()
	deadline := finished.Add(pick(120*time.Second, 90*time.Second))
	for time.Now().Before(deadline) {
		done := 0
		for _, c := range cases {
			if task, err := harness.GetTask(ctxFor(t, 10*time.Second), s.c, ns, c.name); err == nil && finalPhase(task.Status.Phase) {
				done++
			}
		}
		if done == len(cases) {
			break
		}
		time.Sleep(time.Second)
	}
	finished = time.Now()
	quiet := 5 * time.Second
	time.Sleep(quiet)
	ctx := ctxFor(t, 30*time.Second)
	seen, err := rec.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var existing batchv1.JobList
	if err := s.c.List(ctx, &existing, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for k, v := range rec.Overlaps() {
		t.Errorf("two Jobs at the same time for Task %s run %s attempt %s: %v", k.Task, k.Run, k.Attempt, v)
	}
	violations := 0
	for _, c := range cases {
		task, err := harness.GetTask(ctx, s.c, ns, c.name)
		if err != nil {
			t.Fatal(err)
		}
		c.check(t, c, task, seen, existing.Items)
		if !finalPhase(task.Status.Phase) {
			violations++
		}
		t.Logf("%s: %s -> phase %s, attempts %d, currentRun %q, lastJobName %s, active %d; Jobs seen: %s",
			c.name, c.what, task.Status.Phase, task.Status.Attempts, task.Status.CurrentRun, task.Status.LastJobName, len(task.Status.Active), jobSummary(ofTask(seen, c.name)))
	}
	events := checkMonitor(t, mon)
	figure(t, "%d cases (delete active/backoff/second/finished Job, unlabel managed-by, relabel attempt/task); %d left a Task that never finishes, %d Jobs seen, 0 overlapping Jobs per attempt wanted (got %d), %d Task versions watched, %d steps backwards; all ended %s after the cases were created, then %s quiet",
		len(cases), violations, len(seen), len(rec.Overlaps()), events, len(mon.Problems()), harness.Secs(finished.Sub(start)), harness.Secs(quiet))
}
