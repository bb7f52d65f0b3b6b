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

// startRun is run NAME (and its alias trigger NAME): check the flags,
// write the token (a new one unless req has one) and the values, and wait
// when asked.
func (a *app) startRun(cmd *cobra.Command, name string, req runRequest, values []string, wait, detach bool, timeout time.Duration) error {
	if err := checkTimeout(timeout); err != nil {
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

// runRequest is what a run of an existing Task asks for: a token and the
// run's values.
type runRequest struct {
	token  string
	params map[string]string
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

	patched, err := setRunNow(ctx, c, key, token, req.params)
	if err != nil {
		return err
	}
	id := runs.RunNowID(token)
	fmt.Fprintf(a.messages(), "task/%s triggered: run %s (run-now token %q)\n", key.Name, id, token)
	if !wait {
		return a.printTaskIfAsked(ctx, patched)
	}
	return a.waitOrCancel(ctx, c, key, timeout, start, &runTracker{id: id, token: token}, detach)
}

// setRunNow writes the run-now token and the run's values in one merge
// patch, so the operator reads them from the same version of the Task:
// no values removes the annotation, so the run gets the defaults and not
// an earlier run's values.
func setRunNow(ctx context.Context, c *clients, key types.NamespacedName, token string, values map[string]string) (*v1alpha1.Task, error) {
	var runParams any // JSON null removes the annotation
	if len(values) > 0 {
		b, err := json.Marshal(values)
		if err != nil {
			return nil, err
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
