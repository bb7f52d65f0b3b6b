// Package plan is the decision of one reconcile pass: Decide turns what the
// pass observed of a Task (its Jobs as runs, the pods it had to look at,
// now) into one Plan value: what to stop, start, record on Jobs and prune,
// when to look again, whether the Task expired. It is pure, like the
// planners it chains (retry.Next for each run, scheduler.PlanRuns for new
// runs), so every decision is table-tested without an API server; the
// reconciler only carries the plan out.
//
//   - plan.go: Input, Plan and Decide, the decision in the order it is made
//     (each stage a method of decision), the outputs it keeps, and what
//     it decides last (wake-ups, pruning, the TTL);
//   - start.go: the start and capacity timeouts (stage 1);
//   - starts.go: which attempts and runs start, Replace, and the queue's
//     gate (stage 4);
//   - cancel.go: the cancel token and the runs it stops;
//   - queue.go: which starts of a queued Task wait for admission, and the
//     queued new runs the status remembers;
//   - prune.go: the history limits, and the TTL of a finished Task;
//   - backfill.go: a backfill request's slots, started oldest first
//     behind a cursor in the status (stage 4, before the queue's gate).
//   - chain.go: the runs upstream runs start (spec.after, internal/chain),
//     and what they consume (stage 4).
//
// A run's values (spec.params) are decided in starts.go when the run starts
// (internal/params); the business calendar is applied to the schedule in
// plan.go (calendarOf), also to the runs of spec.after (chain.go).
package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/chain"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/params"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// pruneDelay is how soon a pass prunes runs the previous pass recorded.
const pruneDelay = time.Second

// replacedMessage is the stop message of a run concurrencyPolicy Replace
// stopped.
const replacedMessage = "replaced by a newer run (concurrencyPolicy: Replace)"

// Input is what a pass observed.
type Input struct {
	// Task is the Task as read, its stored status included.
	Task *v1alpha1.Task
	// Runs are what the Task's Jobs say, with a stand-in (reason
	// JobDeleted) for each attempt the status records whose Job is gone.
	Runs []runs.Run
	// DeletedJobs counts those stand-ins.
	DeletedJobs int
	// Relabel holds, by Job name, the labels to put back on Jobs the Task
	// controls that lost them.
	Relabel map[string]map[string]string
	// Pods holds, by Job name, the pods of each active attempt whose start
	// check is due (retry.StartCheckDue); other attempts have none here.
	Pods map[string][]retry.PodStart
	// Remote holds, by Job name, what the mirrored status and the Workload
	// say of the pods of each active remote attempt (runs.Attempt.Remote)
	// whose start check is due: its pods are on a worker cluster.
	Remote map[string]retry.RemotePods
	// Refused holds, by Job name, why the Job controller could not create
	// the pods of an active attempt that has none, when its start check is
	// due and it said why (a FailedCreate event).
	Refused map[string]*retry.Refusal
	// Captured holds, by Job name, what the pods of an attempt the Job
	// controller is failing for its deadline printed, read this pass.
	Captured map[string]string
	// RetryAfter holds, by Job name, the Retry-After (seconds, 0: none) the
	// pods of a failed http attempt reported, read this pass.
	RetryAfter map[string]int64
	// Workers holds, by Job name, the worker cluster the Workload of each
	// active remote attempt names this pass ("": none yet, or again).
	Workers map[string]string
	// Queue is the TaskQueue spec.queueName names, as the pass saw it; nil
	// when the Task names none.
	Queue *Queue
	// HeldBy holds, by Job name, what holds an attempt whose Job is held
	// suspended, when the pass could tell (Kueue's Workload message).
	HeldBy map[string]string
	// Policy is the operator's own check of the spec against its
	// namespace (the --service-accounts-opt-in flag): nil when there is
	// nothing to check.
	Policy *PolicyCheck
	// Notifications are the Task's notification Jobs, by run id: pruned
	// with their run once their outcome is recorded.
	Notifications map[string]notify.Job
	// SkipDatesFrom is what the ConfigMap spec.skipDatesFrom names holds:
	// its lines, or why it could not be read (nil: none named).
	SkipDatesFrom *SkipDateList
	// Calendars are the TaskCalendars spec.skipCalendars names, in its
	// order: each one's dates, or why there are none (it does not exist).
	Calendars []SkipDateList
	// Upstreams are the Tasks spec.after names, in its order, as the pass
	// saw them; Cycle, when set, is a cycle of spec.after through this
	// Task (its names, this Task first and last).
	Upstreams []chain.Upstream
	Cycle     []string
	Now       time.Time
}

// SkipDateList is the skip dates read from a ConfigMap
// (spec.skipDatesFrom) or a TaskCalendar (spec.skipCalendars).
type SkipDateList struct {
	// Source names where the lines come from, for the messages.
	Source string
	Lines  []string
	// Problem says why there are no lines: the ConfigMap, its key or the
	// calendar is missing, or the namespace did not grant the read. The
	// schedule runs on the other dates meanwhile.
	Problem string
}

// Stop is an attempt to stop: its Job is annotated with the reason and, if
// it is still running, suspended.
type Stop struct {
	RunID   string
	Attempt int32
	Reason  v1alpha1.Reason
	Message string
}

// Start is an attempt to start: its Job to create.
type Start struct {
	RunID     string
	Attempt   int32
	Scheduled *time.Time
	// Params are the run's values (spec.params): decided when the run
	// starts, the same for each of its attempts.
	Params map[string]string
	// Trigger lists the upstream runs that started the run (spec.after).
	Trigger []v1alpha1.TriggerRef
}

// Prune is a finished run whose Jobs go (history limits).
type Prune struct {
	RunID    string
	JobNames []string
}

// Plan is everything one pass does, in the order it does it.
type Plan struct {
	// Problem, when set, is why the spec cannot be acted on: nothing is
	// stopped, started or pruned.
	Problem *status.Problem
	// Relabel: labels to put back, by Job name.
	Relabel map[string]map[string]string
	// Stop: attempts past their start or capacity timeout, runs a cancel
	// token stops, then runs Replace stops.
	Stop []Stop
	// Waiting holds, by Job name, what an attempt whose pods wait for
	// capacity waits for (status: WaitingForCapacity).
	Waiting map[string]string
	// CancelToken is the cancel token hash the status records as consumed
	// (status.lastCancelToken); empty leaves the status as it is.
	CancelToken string
	// Capture: outputs to keep on the Jobs being failed for their deadline
	// (v1alpha1.AnnotationOutput), by Job name.
	Capture map[string]string
	// RecordRetryAfter: Retry-After seconds to keep on the Jobs of failed
	// http attempts (v1alpha1.AnnotationRetryAfter), by Job name.
	RecordRetryAfter map[string]int64
	// RecordWorker: the worker clusters to keep on the Jobs of remote
	// attempts that arrived on one or were taken from one, by Job name
	// (workers.go).
	RecordWorker map[string]WorkerNote
	// Start: the next attempts of existing runs, oldest run first, then
	// the first attempts of new runs.
	Start []Start
	// Queued: the starts the queue has not admitted, waiting in line
	// (status.queued); QueuedMissed: cron slots queued past their
	// startingDeadlineSeconds, skipped and counted as missed; Dropped:
	// queued new runs a cancel or a Replace ended before they had a Job.
	Queued       []v1alpha1.QueuedAttempt
	QueuedMissed []v1alpha1.QueuedAttempt
	Dropped      []Dropped
	// Queue is the TaskQueue as the pass saw it (nil: none named).
	Queue *Queue
	// RunNowToken is the run-now token hash the new Jobs record as
	// consumed.
	RunNowToken string
	// Schedule is the scheduler's answer: new runs, replaced runs, the
	// token consumed, the cron slots and why a slot was skipped.
	Schedule scheduler.Plan
	// Prune: finished runs beyond the history limits.
	Prune []Prune
	// Expire: a finished one-shot Task past its ttlSecondsAfterFinished,
	// to delete after the status write.
	Expire bool
	// Wake is when the Task next needs a look (zero: only when something
	// changes): a start check, a retry, the next slot, a prune, a TTL.
	Wake time.Time
	// DeletedJobs counts the attempts whose Job a user deleted, which only
	// this pass knows of (see RecordLater).
	DeletedJobs int
	// CalendarProblem says which skip dates could not be used (a missing
	// ConfigMap, a line that is no date): the schedule runs on the others.
	CalendarProblem string
	// Backfill is the backfill request's new status (backfill.go); nil
	// leaves it as it is.
	Backfill *v1alpha1.BackfillStatus
	// After is status.after as this pass leaves it (chain.go): nil for a
	// Task without spec.after. ChainSkipped are the triggers a skip date
	// consumed without a run, UpstreamMissing the Tasks of spec.after that
	// do not exist. (The runs upstream runs started are in Start, and
	// reported from the status: history[].trigger.)
	After           []v1alpha1.AfterStatus
	ChainSkipped    []chain.Trigger
	UpstreamMissing []string
}

// Decide makes the decision of one pass. It simulates its own stops and
// starts on a copy of the runs, so what it decides after them (retries to
// wait for, runs to prune, the TTL) sees the runs as the pass leaves them.
// Each stage is a method of decision, in the order the pass acts.
func Decide(in Input) Plan {
	d := &decision{in: in, task: in.Task, now: in.Now, p: Plan{Relabel: in.Relabel, DeletedJobs: in.DeletedJobs, Queue: in.Queue}}
	schedule, problem := validate(d.task, in.Policy, in.Cycle)
	if HeldToCalendar(d.task) {
		d.calendar, d.p.CalendarProblem = calendarOf(d.task, in.SkipDatesFrom, in.Calendars)
	}
	if schedule != nil {
		schedule = schedule.WithCalendar(d.calendar)
	}
	if problem != nil {
		d.p.Problem = problem
		if in.Policy != nil && in.Policy.Refused != nil {
			// The namespace may opt in any time; nothing watches it.
			d.p.Wake = d.now.Add(PolicyRecheck)
		}
		return d.p
	}
	d.stamp = d.now.UTC().Truncate(time.Second) // a stop's time, as its annotation keeps it
	d.rs = runs.Clone(in.Runs)

	d.stopAgain()        // 0. stopped attempts whose Job runs again (stopagain.go)
	d.checkStarts()      // 1. start and capacity timeouts (start.go)
	d.takePending()      //    the queued new runs the status remembers (queue.go)
	d.cancel()           // 2. a new cancel token (cancel.go)
	d.keepOutputs()      // 3. outputs and Retry-After to keep on Jobs
	d.noteWorkers()      //    and remote attempts' workers
	d.checkDeadlines()   //    attempts past activeDeadlineSeconds stopped (start.go)
	d.planRuns(schedule) // 4. next attempts, new runs, Replace, the queue's gate (starts.go)
	d.afterwards()       // 5. retries to wait for, the next slot, pruning, the TTL
	d.p.Wake = d.wake.t
	return d.p
}

// decision is one Decide in progress: its input, the runs as the pass
// will leave them, the plan so far and the earliest wake-up.
type decision struct {
	in    Input
	task  *v1alpha1.Task
	now   time.Time
	stamp time.Time // a stop's time, as its annotation keeps it
	rs    []runs.Run
	// pending are the queued new runs the status remembers that may still
	// start (queue.go).
	pending []v1alpha1.QueuedAttempt
	// calendar holds the skip dates, also for chained runs; consumed and
	// triggers are spec.after's state (chain.go).
	calendar scheduler.Calendar
	consumed map[string]v1alpha1.AfterStatus
	triggers map[string]chain.Trigger
	p        Plan
	wake     earliest
}

// stop plans stopping attempt a of run runID and simulates it.
func (d *decision) stop(runID string, a *runs.Attempt, reason v1alpha1.Reason, msg string) {
	d.p.Stop = append(d.p.Stop, Stop{RunID: runID, Attempt: a.Number, Reason: reason, Message: msg})
	a.Stop(reason, msg, d.stamp)
}

// keepOutputs is stage 3: outputs of attempts being failed for their
// deadline are kept on their Jobs, and so is a failed http attempt's
// Retry-After, read this pass, which sets the earliest next attempt.
func (d *decision) keepOutputs() {
	for i := range d.rs {
		a := d.rs[i].Latest()
		if out := d.in.Captured[a.JobName]; out != "" && a.Phase == runs.Active {
			if d.p.Capture == nil {
				d.p.Capture = map[string]string{}
			}
			d.p.Capture[a.JobName] = out
			a.Output = out
		}
		if secs, ok := d.in.RetryAfter[a.JobName]; ok && !a.RetryAfterKnown {
			if d.p.RecordRetryAfter == nil {
				d.p.RecordRetryAfter = map[string]int64{}
			}
			d.p.RecordRetryAfter[a.JobName] = secs
			a.RetryAfter, a.RetryAfterKnown = time.Duration(secs)*time.Second, true
		}
	}
}

// afterwards is stage 5, from the runs as the pass leaves them: retries to
// wait for, the next slot, the history limits, the TTL.
func (d *decision) afterwards() {
	task, now, p := d.task, d.now, &d.p
	steps := retry.Steps(task, d.rs, now)
	for _, s := range steps {
		if s.Kind == retry.WaitForRetry {
			d.wake.add(s.At)
		}
	}
	if p.Schedule.Slots != nil {
		d.wake.add(p.Schedule.Slots.Wake())
	}
	kept, prune, again := pruneRuns(task, d.rs, steps, d.in.Notifications)
	p.Prune = prune
	if again {
		d.wake.add(now.Add(pruneDelay))
	}
	if at, ok := expiresAt(task, kept, steps, p.Schedule); ok && len(p.Queued) == 0 && !notifying(task, d.in.Notifications) {
		if !now.Before(at) {
			p.Expire = true
		} else {
			d.wake.add(at)
		}
	}
}

// PolicyCheck is the result of the operator's own check of a Task's spec
// against its cluster and namespace: Refused, when set, is why the spec may
// not run there (InvalidSpec).
type PolicyCheck struct {
	Refused *status.Problem
}

// PolicyRecheck is how often a Task the policy refuses is checked again: a
// namespace opting in (or Kueue being installed) is not watched.
const PolicyRecheck = 5 * time.Minute

// validate reports what the API server's schema could not refuse, and
// parses the schedule. A Job create the API server refused for this
// generation is not retried until the spec changes.
func validate(task *v1alpha1.Task, policy *PolicyCheck, cycle []string) (*scheduler.Schedule, *status.Problem) {
	var schedule *scheduler.Schedule
	if task.Spec.Schedule != nil {
		s, err := scheduler.ParseCached(*task.Spec.Schedule, ptr.Deref(task.Spec.TimeZone, ""))
		if err != nil {
			return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSchedule, Message: err.Error()}
		}
		schedule = s
	}
	if task.Spec.QueueName != "" && jobs.KueueManaged(task) {
		return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"spec.queueName %q and the label %s=%s name two queues: use a TaskQueue (spec.queueName) or Kueue (the label), not both",
			task.Spec.QueueName, v1alpha1.LabelKueueQueueName, task.Labels[v1alpha1.LabelKueueQueueName])}
	}
	if problem := undeclaredParams(task); problem != nil {
		return nil, problem
	}
	if policy != nil && policy.Refused != nil {
		return nil, policy.Refused
	}
	if len(cycle) > 0 {
		return nil, cycleProblem(cycle)
	}
	// A stored InvalidSpec of this generation may be the policy's own
	// earlier refusal, which a namespace lifts without a spec change: when
	// the policy now allows the spec it is tried again (a Job the API
	// server refuses is refused again, at the cost of one request).
	// Likewise a cycle of spec.after, which an edit of another Task breaks.
	if c := meta.FindStatusCondition(task.Status.Conditions, v1alpha1.ConditionStalled); c != nil && policy == nil && len(task.Spec.After) == 0 &&
		c.Status == "True" && c.Reason == string(v1alpha1.ReasonInvalidSpec) && c.ObservedGeneration == task.Generation {
		return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: c.Message}
	}
	return schedule, nil
}

// HeldToCalendar reports whether a Task's runs are held to its skip
// dates: the slots of a schedule, and the runs spec.after starts. Only
// then are the dates read.
func HeldToCalendar(task *v1alpha1.Task) bool {
	return task.Spec.Schedule != nil || len(task.Spec.After) > 0
}

// calendarOf is the Task's business calendar: spec.skipDates, the
// ConfigMap's lines, the TaskCalendars' dates, and the daylight-saving
// policies. Dates it cannot read are left out and said in problem.
func calendarOf(task *v1alpha1.Task, from *SkipDateList, calendars []SkipDateList) (scheduler.Calendar, string) {
	spec := &task.Spec
	cal := scheduler.Calendar{Once: spec.RepeatedTimePolicy != v1alpha1.RepeatedTwice, RunAfter: spec.SkippedTimePolicy == v1alpha1.SkippedRunAfter}
	var problems []string
	if bad := cal.AddDates(spec.SkipDates); len(bad) > 0 {
		problems = append(problems, "spec.skipDates: "+strings.Join(bad, "; "))
	}
	lists := calendars
	if ref := spec.SkipDatesFrom; ref != nil && from != nil {
		l := *from
		l.Source = fmt.Sprintf("ConfigMap %s key %s", ref.Name, ref.Key)
		lists = append([]SkipDateList{l}, calendars...)
	}
	for _, l := range lists {
		switch {
		case l.Problem != "":
			problems = append(problems, l.Problem)
		default:
			if bad := cal.AddDates(l.Lines); len(bad) > 0 {
				problems = append(problems, l.Source+": "+strings.Join(bad, "; ")+" (ignored)")
			}
		}
	}
	return cal, strings.Join(problems, "; ")
}

// undeclaredParams: $(params.<name>) in an http Task's request naming a
// param spec.params does not declare (too costly for the schema to check
// in texts this long).
func undeclaredParams(task *v1alpha1.Task) *status.Problem {
	if task.Spec.Type != v1alpha1.TaskTypeHTTP {
		return nil
	}
	texts := map[string]string{"spec.url": task.Spec.URL}
	if h := task.Spec.HTTP; h != nil {
		texts["spec.http.body"] = h.Body
		for i, hd := range h.Headers {
			if hd.Value != nil {
				texts[fmt.Sprintf("spec.http.headers[%d].value", i)] = *hd.Value
			}
		}
	}
	fields := slices.Sorted(maps.Keys(texts))
	for _, f := range fields {
		if names := params.Undeclared(task.Spec.Params, texts[f]); len(names) > 0 {
			return &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
				"%s uses $(params.%s), which spec.params does not declare", f, names[0])}
		}
	}
	return nil
}

// knownRuns is every run id the Task ever had. The status remembers runs
// whose Jobs were pruned; any run at all means the initial run happened
// (a run-now on a one-shot Task that never ran is its first run).
func knownRuns(task *v1alpha1.Task, rs []runs.Run) map[string]bool {
	known := map[string]bool{}
	for _, r := range rs {
		known[r.ID] = true
	}
	for _, h := range task.Status.History {
		known[h.RunID] = true
	}
	if task.Status.CurrentRun != "" || len(rs) > 0 {
		known[runs.OneShot] = true
	}
	return known
}

// consumedTokens are the run-now token hashes recorded on the Jobs.
func consumedTokens(rs []runs.Run) map[string]bool {
	consumed := map[string]bool{}
	for _, r := range rs {
		for _, a := range r.Attempts {
			if a.RunNowToken != "" {
				consumed[a.RunNowToken] = true
			}
		}
	}
	return consumed
}

func runStates(rs []runs.Run, steps map[string]retry.Step) []scheduler.RunState {
	out := make([]scheduler.RunState, 0, len(rs))
	for _, r := range rs {
		out = append(out, scheduler.RunState{ID: r.ID, Active: steps[r.ID].Active()})
	}
	return out
}

// earliest keeps the earliest of the times added to it.
type earliest struct{ t time.Time }

func (e *earliest) add(t time.Time) {
	if !t.IsZero() && (e.t.IsZero() || t.Before(e.t)) {
		e.t = t
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
