package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// interruptGrace bounds what the plugin still does after SIGINT/SIGTERM:
// waiting for the operator to have seen a just-created Task, and setting
// the cancel token. CI runners kill a job a few seconds after signalling it.
const interruptGrace = 10 * time.Second

func (a *app) cancelCommand() *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cancel NAME [--wait] [--timeout DURATION]",
		Short: "Stop every unfinished run of a Task now (cancel annotation)",
		Long: `Stop every unfinished run of the Task now by setting a new cancel token in
the batch.taskops.io/cancel annotation (a merge patch). The operator stops
their Jobs (their pods end; the Jobs stay, annotated Cancelled), and the
runs end with result Cancelled and are not retried. A cron Task keeps its
schedule; 'kubectl task trigger' afterwards starts a new run.

With --wait, wait until the operator took the token and no run of the Task
is unfinished (exit 0); -o then prints the Task's newest run as it ended
(with concurrencyPolicy Allow several runs may have stopped: 'kubectl task
history' lists them).`,
		Example: `  # Stop task/build now and wait until its runs are cancelled
  kubectl task cancel build -n ci --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := a.taskArg(timeout, args[0])
			if err != nil {
				return err
			}
			start := a.now()
			token := a.newToken()
			task, err := c.getTask(cmd.Context(), key)
			if err != nil {
				return err
			}
			if task.Status.ObservedGeneration == 0 {
				fmt.Fprintf(a.errOut(), "warning: the operator has not processed task/%s yet; a cancel token it finds on its first look stops nothing\n", key.Name)
			}
			patched, err := setCancel(cmd.Context(), c, key, token)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.messages(), "task/%s: cancel requested (cancel token %q)\n", key.Name, token)
			if !wait {
				return a.printTaskIfAsked(cmd.Context(), patched)
			}
			return a.waitFor(cmd.Context(), c, key, timeout, start, cancelTracker(runs.TokenHash(token)))
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the operator stopped the Task's runs")
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd, "with --wait the newest run as it ended (a TaskRunView, cli.taskops.io/v1alpha1; name: run/ID), else the Task")
	return cmd
}

// setCancel sets the cancel annotation of the Task to token.
func setCancel(ctx context.Context, c *clients, key types.NamespacedName, token string) (*v1alpha1.Task, error) {
	return patchAnnotations(ctx, c, key, map[string]any{v1alpha1.AnnotationCancel: token}, "the "+v1alpha1.AnnotationCancel+" annotation")
}

// patchAnnotations writes annotations onto the Task in one merge patch (a
// nil value removes one), so the operator reads them from one version of
// it; what names them in an error. It returns the Task as the patch left
// it (the API server's answer), for -o.
func patchAnnotations(ctx context.Context, c *clients, key types.NamespacedName, annotations map[string]any, what string) (*v1alpha1.Task, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return nil, err
	}
	target := &v1alpha1.Task{}
	target.Name, target.Namespace = key.Name, key.Namespace
	if err := c.ctrl.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFoundError(key)
		}
		return nil, fmt.Errorf("setting %s on task/%s: %w", what, key.Name, err)
	}
	return target, nil
}

// cancelTracker is done once the operator consumed the cancel token hash
// and no run of the Task is unfinished.
func cancelTracker(hash string) tracker {
	return trackerFunc(func(t *v1alpha1.Task) (string, *outcome) {
		if t.Status.LastCancelToken != hash {
			return "waiting for the operator to take the cancel token", nil
		}
		var cancelled []string
		for _, h := range t.Status.History {
			switch h.Result {
			case v1alpha1.RunResultRunning:
				return fmt.Sprintf("run %s is still stopping", h.RunID), nil
			case v1alpha1.RunResultCancelled:
				cancelled = append(cancelled, h.RunID)
			}
		}
		if len(t.Status.Active) > 0 {
			return fmt.Sprintf("%d Job(s) still active", len(t.Status.Active)), nil
		}
		line := fmt.Sprintf("task/%s: no run is unfinished", t.Name)
		if len(cancelled) > 0 {
			line += "; cancelled: run " + strings.Join(cancelled, ", run ")
		}
		view := currentRunView(t)
		if len(t.Status.History) > 0 {
			view = runView(t, &t.Status.History[0]) // newest first
		}
		return "", &outcome{code: ExitOK, lines: []string{line}, view: view}
	})
}

// waitOrCancel waits as waitFor does. When the plugin is interrupted
// (SIGINT, SIGTERM: a CI job being cancelled) it cancels the Task's runs
// on its way out, unless detach: the cluster work stops with the CI job.
// It ends with ExitCancelled then.
func (a *app) waitOrCancel(ctx context.Context, c *clients, key types.NamespacedName, timeout time.Duration, start time.Time, tr tracker, detach bool) error {
	err := a.waitFor(ctx, c, key, timeout, start, tr)
	if ctx.Err() == nil || detach {
		return err
	}
	gctx, done := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
	defer done()
	// A cancel token the operator finds on its first look at a Task counts
	// as part of the creation: wait (briefly) until it has seen the Task.
	for {
		task, gerr := c.getTask(gctx, key)
		if gerr != nil {
			return &exitError{code: ExitError, err: fmt.Errorf("interrupted; could not cancel task/%s: %w", key.Name, gerr)}
		}
		if task.Status.ObservedGeneration != 0 {
			break
		}
		if perr := pause(gctx, 200*time.Millisecond); perr != nil {
			return &exitError{code: ExitError, err: fmt.Errorf("interrupted before the operator picked up task/%s; it was not cancelled", key.Name)}
		}
	}
	token := a.newToken()
	if _, cerr := setCancel(gctx, c, key, token); cerr != nil {
		return &exitError{code: ExitError, err: fmt.Errorf("interrupted; %w", cerr)}
	}
	fmt.Fprintf(a.errOut(), "task/%s: interrupted; cancelled its runs (cancel token %q; --detach leaves them running)\n", key.Name, token)
	return exitCode(ExitCancelled)
}
