package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func (a *app) backfillCommand() *cobra.Command {
	var (
		from, to string
		wait     bool
		timeout  time.Duration
		token    string
	)
	cmd := &cobra.Command{
		Use:   "backfill NAME --from TIME --to TIME [--wait]",
		Short: "Run a cron Task's slots of a past range that have no run",
		Long: `Ask for a backfill: every slot of the Task's schedule in [--from, --to]
(RFC 3339 times; --to not in the future) that has no run gets one, with its
normal slot id and TASK_SCHEDULED_TIME, oldest first, following
concurrencyPolicy (Forbid: one after the other) and the Task's queue. Slots
on skip dates are left out; at most 1000 slots per request. It writes the
batch.taskops.io/backfill token and batch.taskops.io/backfill-range in one
patch; status.backfill shows the progress.

With --wait, wait until the backfill finished (exit 0), was refused (1) or
cancelled (4). 'kubectl task cancel NAME' stops it.`,
		Example: `  # Re-run last week's slots missed in an outage
  kubectl task backfill settlement --from 2026-11-23T00:00:00Z --to 2026-11-30T00:00:00Z --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			f, errF := time.Parse(time.RFC3339, from)
			t, errT := time.Parse(time.RFC3339, to)
			if errF != nil || errT != nil {
				return usageErrorf("--from and --to must be RFC 3339 times, such as 2026-11-30T00:00:00Z")
			}
			if t.Before(f) {
				return usageErrorf("--to is before --from")
			}
			c, err := a.getClients()
			if err != nil {
				return err
			}
			if token == "" {
				token = a.newToken()
			}
			key := types.NamespacedName{Namespace: c.namespace, Name: args[0]}
			start := a.now()
			patched, err := setBackfill(cmd.Context(), c, key, token, f.UTC().Format(time.RFC3339)+"/"+t.UTC().Format(time.RFC3339))
			if err != nil {
				return err
			}
			fmt.Fprintf(a.messages(), "task/%s: backfill %q of %s to %s asked for\n", key.Name, token, f.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
			if !wait {
				return a.printTaskIfAsked(cmd.Context(), patched)
			}
			return a.waitFor(cmd.Context(), c, key, timeout, start, backfillTracker(token))
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the range's first instant (RFC 3339)")
	cmd.Flags().StringVar(&to, "to", "", "the range's last instant (RFC 3339), not in the future")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the backfill finished; the exit code tells how")
	cmd.Flags().StringVar(&token, "token", "", "the backfill token (default: a UTC timestamp plus a random suffix); the same token again does nothing")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd, printsTask+" (status.backfill shows the request), when asked for or, with --wait, when it ended")
	return cmd
}

// setBackfill writes the token and the range in one merge patch.
func setBackfill(ctx context.Context, c *clients, key types.NamespacedName, token, rng string) (*v1alpha1.Task, error) {
	return patchAnnotations(ctx, c, key, map[string]any{v1alpha1.AnnotationBackfill: token, v1alpha1.AnnotationBackfillRange: rng}, "the backfill")
}

// backfillTracker is done when the request with token ended.
func backfillTracker(token string) tracker {
	return trackerFunc(func(t *v1alpha1.Task) (string, *outcome) {
		bf := t.Status.Backfill
		if bf == nil || bf.Token != token {
			return "waiting for the operator to take the backfill", nil
		}
		line := fmt.Sprintf("task/%s: backfill %q %s: %d of %d slot(s) finished", t.Name, token, bf.State, bf.Finished, bf.Total)
		if bf.Message != "" {
			line += ": " + bf.Message
		}
		switch bf.State {
		case v1alpha1.BackfillFinished:
			return "", &outcome{code: ExitOK, lines: []string{line}}
		case v1alpha1.BackfillRefused:
			return "", &outcome{code: ExitFailed, lines: []string{line}}
		case v1alpha1.BackfillCancelled:
			return "", &outcome{code: ExitCancelled, lines: []string{line}}
		}
		return fmt.Sprintf("Running (backfill %q: %d started, %d finished of %d)", token, bf.Started, bf.Finished, bf.Total), nil
	})
}
