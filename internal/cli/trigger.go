package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// maxTokenLength bounds a user-chosen run-now token.
const maxTokenLength = 256

func (a *app) triggerCommand() *cobra.Command {
	var (
		wait    bool
		detach  bool
		timeout time.Duration
		token   string
		values  []string
	)
	cmd := &cobra.Command{
		Use:   "trigger NAME [--param NAME=VALUE]... [--wait] [--timeout DURATION]",
		Short: "Start one run of a Task now (run-now annotation) and optionally wait for it",
		Long: `Start one run of the Task now by setting a new run-now token in the
batch.taskops.io/run-now annotation (a merge patch). The run's id is
"m" + the first 10 hex digits of sha256(token).

The token is a UTC timestamp plus a random suffix unless --run-now-token sets
it: a fixed token (say, the CI pipeline id) makes the step idempotent, since
setting the same token again starts no second run and --wait then reports
the run that token started.

--param gives the run a value for one of spec.params (repeatable): the
values go into the batch.taskops.io/run-params annotation in the same patch
as the token, so the run uses exactly them (params without a value get
their default). Without --param the annotation is removed: the run gets the
defaults.

The run follows spec.concurrencyPolicy (Forbid: it starts when the active run
ended) and also runs while the Task is suspended.

With --wait, wait for that run to finish: exit 0 when it succeeded, 1 when it
failed or was stopped, 4 when it was cancelled. When interrupted (SIGINT,
SIGTERM) it cancels the Task's runs before it exits, unless --detach.`,
		Example: `  # Re-run task/nightly-report and wait up to 15 minutes for that run
  kubectl task trigger nightly-report --wait --timeout 15m

  # Idempotent trigger from CI
  kubectl task trigger deploy-db --run-now-token "pipeline-$CI_PIPELINE_ID" --wait

  # Re-run the report for a past date
  kubectl task trigger nightly-report --param date=2026-11-30 --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkToken(cmd, token); err != nil {
				return err
			}
			return a.startRun(cmd, args[0], runRequest{token: token}, values, wait, detach, timeout)
		},
	}
	addParamFlag(cmd, &values)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the triggered run finished; the exit code tells how")
	cmd.Flags().BoolVar(&detach, "detach", false, "with --wait: when interrupted, leave the run running instead of cancelling the Task's runs")
	addTokenFlag(cmd, &token)
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd)
	return cmd
}

// startRun is trigger NAME and run NAME: check the flags, write the token
// (a new one unless req has one) and the values, and wait when asked.
func (a *app) startRun(cmd *cobra.Command, name string, req runRequest, values []string, wait, detach bool, timeout time.Duration) error {
	if err := checkTimeout(timeout); err != nil {
		return err
	}
	if err := a.checkOutput(); err != nil {
		return err
	}
	given, err := parseParams(values)
	if err != nil {
		return err
	}
	c, err := a.getClients()
	if err != nil {
		return err
	}
	if req.token == "" {
		req.token = a.newToken()
	}
	req.params = given
	key := types.NamespacedName{Namespace: c.namespace, Name: name}
	return a.trigger(cmd.Context(), c, key, req, wait, detach, timeout)
}

// runRequest is what a trigger asks for: a token, the run's values, and
// whether -o prints the run's history entry (run NAME) or the Task.
type runRequest struct {
	token     string
	params    map[string]string
	printsRun bool
}

func (a *app) trigger(ctx context.Context, c *clients, key types.NamespacedName, req runRequest, wait, detach bool, timeout time.Duration) error {
	token := req.token
	start := a.now()
	task, err := c.getTask(ctx, key)
	if err != nil {
		return err
	}
	if task.Status.ObservedGeneration == 0 {
		// A token the operator finds on its first look at a Task counts as
		// part of the creation and starts no run.
		if !wait {
			fmt.Fprintf(a.errOut(), "warning: the operator has not processed task/%s yet; a run-now token it finds on its first look starts no run\n", key.Name)
		} else {
			err := a.waitFor(ctx, c, key, timeout, start, trackerFunc(func(t *v1alpha1.Task) (string, *outcome) {
				if t.Status.ObservedGeneration != 0 {
					return "", &outcome{code: ExitOK, step: true}
				}
				return "Pending (waiting for the operator to pick up the Task before triggering it)", nil
			}))
			if err != nil {
				return err
			}
		}
	}

	if err := setRunNow(ctx, c, key, token, req.params); err != nil {
		return err
	}
	id := runs.RunNowID(token)
	fmt.Fprintf(a.messages(), "task/%s triggered: run %s (run-now token %q)\n", key.Name, id, token)
	if !wait {
		if a.output != "" {
			task, err := c.getTask(ctx, key)
			if err != nil {
				return err
			}
			return a.printTask(ctx, task)
		}
		return nil
	}
	return a.waitOrCancel(ctx, c, key, timeout, start, &runTracker{id: id, token: token, printRun: req.printsRun}, detach)
}

// setRunNow writes the run-now token and the run's values in one merge
// patch, so the operator reads them from the same version of the Task:
// no values removes the annotation, so the run gets the defaults and not
// an earlier run's values.
func setRunNow(ctx context.Context, c *clients, key types.NamespacedName, token string, values map[string]string) error {
	var runParams any // JSON null removes the annotation
	if len(values) > 0 {
		b, err := json.Marshal(values)
		if err != nil {
			return err
		}
		runParams = string(b)
	}
	return patchAnnotations(ctx, c, key, map[string]any{v1alpha1.AnnotationRunNow: token, v1alpha1.AnnotationRunParams: runParams}, "the run-now token")
}

// addParamFlag adds --param NAME=VALUE (repeatable).
func addParamFlag(cmd *cobra.Command, values *[]string) {
	cmd.Flags().StringArrayVar(values, "param", nil, "a value for the run: NAME=VALUE, one of spec.params (repeatable; the value may hold anything, '=' included)")
}

// parseParams reads --param values; a name twice is an error.
func parseParams(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--param %q: want NAME=VALUE", kv)
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf("--param %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// trackerFunc adapts a function to a tracker.
type trackerFunc func(t *v1alpha1.Task) (string, *outcome)

func (f trackerFunc) observe(t *v1alpha1.Task) (string, *outcome) { return f(t) }

// newRunNowToken is a UTC timestamp plus a random suffix: unique, and it
// says when the run was asked for.
func newRunNowToken() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// addTokenFlag adds --run-now-token to a verb that starts a run.
func addTokenFlag(cmd *cobra.Command, token *string) {
	cmd.Flags().StringVar(token, "run-now-token", "", "the run-now token to set (default: a UTC timestamp plus a random suffix); a fixed one (the CI pipeline's id) makes the step idempotent")
}

// checkToken refuses a --run-now-token that is empty or too long.
func checkToken(cmd *cobra.Command, token string) error {
	if len(token) > maxTokenLength {
		return usageErrorf("--run-now-token is longer than %d characters", maxTokenLength)
	}
	if cmd.Flags().Changed("run-now-token") && token == "" {
		return usageErrorf("--run-now-token must not be empty")
	}
	return nil
}
