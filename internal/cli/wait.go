package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

func (a *app) waitCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME",
		Short: "Wait until a Task (one-shot) or its current/next run (cron) finished",
		Long: `Wait until the Task finished and exit with its result.

A one-shot Task (no spec.schedule) is done when it succeeded (Ready=True,
exit 0) or failed for good (Failed=True, exit 1: the Failed condition's reason
and message and status.lastError are printed). Status is trusted only once
status.observedGeneration equals metadata.generation. When a run-now token is
waiting to be picked up, wait waits for the run that token starts.

For a cron Task, wait waits for the run in progress, or else for the next run
(scheduled or run-now), to finish and reports its result.

Progress goes to stderr, the result to stdout (success) or stderr (failure).`,
		Example: `  # Wait up to 10 minutes for task/build to finish
  kubectl task wait build -n ci --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := a.taskArg(timeout, args[0])
			if err != nil {
				return err
			}
			return a.waitFor(cmd.Context(), c, key, timeout, a.now(), newTaskTracker())
		},
	}
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd, printsRun)
	return cmd
}

func addTimeoutFlag(cmd *cobra.Command, timeout *time.Duration) {
	cmd.Flags().DurationVar(timeout, "timeout", DefaultTimeout,
		"how long to wait (e.g. 90s, 10m, 1h); 0 waits without limit")
}

// taskArg checks --timeout and names the Task a command is about, in the
// namespace of -n or the kubeconfig context.
func (a *app) taskArg(timeout time.Duration, name string) (*clients, types.NamespacedName, error) {
	if err := checkTimeout(timeout); err != nil {
		return nil, types.NamespacedName{}, err
	}
	c, err := a.getClients()
	if err != nil {
		return nil, types.NamespacedName{}, err
	}
	return c, types.NamespacedName{Namespace: c.namespace, Name: name}, nil
}

func checkTimeout(timeout time.Duration) error {
	if timeout < 0 {
		return usageErrorf("--timeout must not be negative, got %s", timeout)
	}
	return nil
}

// outcome is how a wait ended: the exit code and what to tell the user.
type outcome struct {
	code  int
	lines []string
	// step: the wait was a step of a command that goes on (not its end),
	// so -o prints nothing yet.
	step bool
	// view, when set, is what -o prints: the run waited for; else -o
	// prints the Task.
	view *cliv1alpha1.TaskRunView
}

// tracker follows one Task until what it waits for happened.
type tracker interface {
	// observe looks at a version of the Task and returns the progress to
	// show and, once finished, the outcome.
	observe(t *v1alpha1.Task) (progress string, done *outcome)
}

// waitFor watches the Task until tr says it finished, ctx ends or timeout
// (counted from start; 0: no timeout) elapses. Progress lines go to
// stderr, a success to stdout, a failure to stderr.
func (a *app) waitFor(ctx context.Context, c *clients, key types.NamespacedName, timeout time.Duration, start time.Time, tr tracker) error {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, start.Add(timeout))
		defer cancel()
	}
	var (
		shown string
		res   *outcome
		final *v1alpha1.Task
	)
	err := watchTask(wctx, c.ctrl, key, func(t *v1alpha1.Task) bool {
		final = t
		progress, done := tr.observe(t)
		if progress != "" && progress != shown {
			fmt.Fprintf(a.errOut(), "task/%s: %s\n", key.Name, progress)
			shown = progress
		}
		res = done
		return done != nil
	})
	if res != nil {
		w := a.messages()
		if res.code != ExitOK {
			w = a.errOut()
		}
		printLines(w, res.lines)
		if res.code == ExitFailed {
			a.printLastLogLines(ctx, c, key)
		}
		if a.output != "" && !res.step {
			print := func() error { return a.printTask(ctx, final) }
			if res.view != nil {
				print = func() error { return a.printRunView(res.view) }
			}
			if err := print(); err != nil {
				return err
			}
		}
		if res.code == ExitOK {
			return nil
		}
		return exitCode(res.code)
	}
	last := ""
	if shown != "" {
		last = " (last seen: " + shown + ")"
	}
	switch {
	case ctx.Err() != nil:
		return &exitError{code: ExitError, err: fmt.Errorf("interrupted while waiting for task/%s%s", key.Name, last)}
	case errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil:
		fmt.Fprintf(a.errOut(), "error: timed out after %s waiting for task/%s in namespace %s%s\n",
			timeout, key.Name, key.Namespace, last)
		return exitCode(ExitTimeout)
	case errors.Is(err, errTaskDeleted):
		return fmt.Errorf("task/%s was deleted before it finished%s", key.Name, last)
	case apierrors.IsNotFound(err):
		return notFoundError(key)
	default:
		return err
	}
}

// failureLogLines is how many lines of the failed attempt's log a failed
// wait prints.
const failureLogLines = 10

// printLastLogLines prints, after a failure, the end of the newest
// attempt's logs while its pods exist: often the reason itself. Best
// effort: a log that cannot be read is left out.
func (a *app) printLastLogLines(ctx context.Context, c *clients, key types.NamespacedName) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	task, err := c.getTask(lctx, key)
	if err != nil {
		return
	}
	pods, job, err := podsOfNewestAttempt(lctx, c.kube, task)
	if err != nil {
		return
	}
	// Read first, print after: a pod that never started (a StartTimeout)
	// has no log, and a heading over nothing reads as an empty log.
	var tail, discard strings.Builder
	_ = streamLogs(lctx, c.kube, pods, logsOptions{tail: failureLogLines}, &tail, &discard, job)
	if tail.Len() > 0 {
		fmt.Fprintf(a.errOut(), "last %d log lines of job %s:\n%s", failureLogLines, job, tail.String())
	}
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// taskTracker waits for a Task as `wait` does: by its conditions for a
// one-shot Task, by its newest run for a cron Task, and for the run of a
// pending run-now token in both cases.
type taskTracker struct {
	// run, once chosen, is the run waited for.
	run *runTracker
	// known are the run ids a cron Task had when the wait began; the next
	// run is the first newer one.
	known map[string]bool
}

func newTaskTracker() *taskTracker { return &taskTracker{} }

func (w *taskTracker) observe(t *v1alpha1.Task) (string, *outcome) {
	if w.run != nil {
		return w.run.observe(t)
	}
	if t.Status.ObservedGeneration == 0 {
		return "Pending (waiting for the operator to pick up the Task)", nil
	}
	if token, ok := pendingRunNowToken(t); ok {
		w.run = &runTracker{id: runs.RunNowID(token)}
		return w.run.observe(t)
	}
	if isCron(t) {
		return w.observeCron(t)
	}
	return observeOneShot(t)
}

// observeOneShot: a one-shot Task is done when Ready or Failed is True for
// the current generation.
func observeOneShot(t *v1alpha1.Task) (string, *outcome) {
	if !observed(t) {
		return fmt.Sprintf("waiting for the operator to observe generation %d (status is from generation %d: %s)",
			t.Generation, t.Status.ObservedGeneration, phaseLine(t)), nil
	}
	switch {
	case conditionTrue(t, v1alpha1.ConditionFailed):
		if c := condition(t, v1alpha1.ConditionFailed); c.Reason == string(v1alpha1.ReasonCancelled) {
			return "", &outcome{code: ExitCancelled, lines: failureLines(t), view: currentRunView(t)}
		}
		return "", &outcome{code: ExitFailed, lines: failureLines(t), view: currentRunView(t)}
	case conditionTrue(t, v1alpha1.ConditionReady):
		return "", &outcome{code: ExitOK, lines: []string{successLine(t, findRun(t, t.Status.CurrentRun))}, view: currentRunView(t)}
	}
	return phaseLine(t), nil
}

// observeCron picks the run to wait for: the newest run while it runs, else
// the next one to appear in the history.
func (w *taskTracker) observeCron(t *v1alpha1.Task) (string, *outcome) {
	if observed(t) && conditionTrue(t, v1alpha1.ConditionFailed) {
		if c := condition(t, v1alpha1.ConditionFailed); c.Reason == string(v1alpha1.ReasonInvalidSchedule) ||
			c.Reason == string(v1alpha1.ReasonInvalidSpec) {
			// No run will start until the spec is fixed.
			return "", &outcome{code: ExitFailed, lines: failureLines(t), view: currentRunView(t)}
		}
	}
	hist := t.Status.History
	if w.known == nil {
		w.known = map[string]bool{}
		if len(hist) > 0 && hist[0].Result == v1alpha1.RunResultRunning {
			w.run = &runTracker{id: hist[0].RunID}
			return w.run.observe(t)
		}
		for _, h := range hist {
			w.known[h.RunID] = true
		}
	}
	if len(hist) > 0 && !w.known[hist[0].RunID] {
		w.run = &runTracker{id: hist[0].RunID}
		return w.run.observe(t)
	}
	if t.Status.Phase == v1alpha1.PhaseSuspended {
		return "Suspended (waiting for the next run; no scheduled run starts while suspended)", nil
	}
	if t.Status.NextScheduleTime != nil {
		return "waiting for the next run at " + formatTime(t.Status.NextScheduleTime), nil
	}
	return "waiting for the next run", nil
}

// runTracker waits for one run, by id, to finish: its history entry
// leaves Running.
type runTracker struct {
	id string
	// token, when set, is the run-now token that starts the run: if another
	// token replaces it before the operator took it, the run never starts.
	token string
}

func (r *runTracker) observe(t *v1alpha1.Task) (string, *outcome) {
	h := findRun(t, r.id)
	if h == nil {
		return r.notStarted(t)
	}
	progress, out := r.verdict(t, h)
	if out != nil {
		out.view = runView(t, h)
	}
	return progress, out
}

// verdict is where the run that has a history entry stands.
func (r *runTracker) verdict(t *v1alpha1.Task, h *v1alpha1.RunRecord) (string, *outcome) {
	switch h.Result {
	case v1alpha1.RunResultSucceeded:
		return "", &outcome{code: ExitOK, lines: []string{successLine(t, h)}}
	case v1alpha1.RunResultCancelled:
		return "", &outcome{code: ExitCancelled, lines: []string{
			fmt.Sprintf("task/%s: run %s was cancelled after %s", t.Name, h.RunID, plural(h.Attempts, "attempt"))}}
	case v1alpha1.RunResultFailed, v1alpha1.RunResultStopped:
		verb := "failed"
		if h.Result == v1alpha1.RunResultStopped {
			verb = "was stopped"
		}
		first := fmt.Sprintf("task/%s: run %s %s after %s", t.Name, h.RunID, verb, plural(h.Attempts, "attempt"))
		if h.Message != "" {
			first += ": " + h.Message
		}
		lines := []string{first}
		if t.Status.CurrentRun == h.RunID {
			lines = append(lines, lastErrorLines(t)...)
			lines = append(lines, whereToLook(t)...)
		}
		return "", &outcome{code: ExitFailed, lines: lines}
	}
	if t.Status.CurrentRun == r.id {
		return phaseLine(t), nil
	}
	return fmt.Sprintf("Running (run %s, attempt %d/%d)", r.id, h.Attempts, maxAttempts(t)), nil
}

// notStarted explains why the run has no history entry yet, or gives up
// when it never will.
func (r *runTracker) notStarted(t *v1alpha1.Task) (string, *outcome) {
	if r.token != "" {
		hash := runs.TokenHash(r.token)
		switch {
		case t.Status.LastRunNowToken == hash:
			// Consumed without a run: the operator saw the token before it
			// first wrote the Task's status and took it as part of the
			// creation.
			return "", &outcome{code: ExitError, lines: []string{fmt.Sprintf(
				"error: task/%s: the operator took run-now token %q as part of the Task's creation and started no run %s; trigger again",
				t.Name, r.token, r.id)}}
		case t.Annotations[v1alpha1.AnnotationRunNow] != r.token:
			return "", &outcome{code: ExitError, lines: []string{fmt.Sprintf(
				"error: task/%s: run-now token %q was replaced by %q before the operator started run %s",
				t.Name, r.token, t.Annotations[v1alpha1.AnnotationRunNow], r.id)}}
		}
	}
	cur := t.Status.CurrentRun
	if cur != "" && cur != r.id && isActive(t.Status.Phase) && policyOf(t) == v1alpha1.ForbidConcurrent {
		return fmt.Sprintf("run %s queued behind run %s (concurrencyPolicy Forbid), which is %s",
			r.id, cur, phaseLine(t)), nil
	}
	return fmt.Sprintf("waiting for the operator to start run %s", r.id), nil
}

func isActive(p v1alpha1.TaskPhase) bool {
	return p == v1alpha1.PhasePending || p == v1alpha1.PhaseRunning || p == v1alpha1.PhaseRetrying
}

func policyOf(t *v1alpha1.Task) v1alpha1.ConcurrencyPolicy {
	if t.Spec.ConcurrencyPolicy == "" {
		return v1alpha1.ForbidConcurrent
	}
	return t.Spec.ConcurrencyPolicy
}

// successLine: "task/x succeeded (run 0, 1 attempt, 12s)".
func successLine(t *v1alpha1.Task, h *v1alpha1.RunRecord) string {
	if h == nil {
		return fmt.Sprintf("task/%s succeeded", t.Name)
	}
	details := []string{"run " + h.RunID, plural(h.Attempts, "attempt")}
	if d, ok := runDuration(h, time.Now()); ok && h.CompletionTime != nil {
		details = append(details, formatDuration(d))
	}
	return fmt.Sprintf("task/%s succeeded (%s)", t.Name, strings.Join(details, ", "))
}
