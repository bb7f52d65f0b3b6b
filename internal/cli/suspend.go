package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// suspendCommand is `suspend NAME` (on true) or `resume NAME`: they set
// spec.suspend as `kubectl patch task NAME --type=merge -p
// '{"spec":{"suspend":true}}'` would, and write nothing when it already
// has that value.
func (a *app) suspendCommand(on bool) *cobra.Command {
	verb, done, long := "resume", "resumed", `Set spec.suspend of the Task to false (a merge patch): its schedule starts
runs again from the next slot (slots missed while suspended are not run;
'kubectl task backfill' runs them), and a run waiting out its backoff goes
on. Nothing is written when the Task is not suspended.`
	if on {
		verb, done, long = "suspend", "suspended", `Set spec.suspend of the Task to true (a merge patch): no scheduled run
starts and no run waiting out its backoff starts its next attempt; an
attempt already running is left to finish, and a run started with
'kubectl task run' or 'trigger' still runs. Nothing is written when the
Task is already suspended. 'kubectl task resume NAME' undoes it.`
	}
	cmd := &cobra.Command{
		Use:     verb + " NAME",
		Short:   fmt.Sprintf("Set spec.suspend of a Task to %t", on),
		Long:    long,
		Example: fmt.Sprintf("  kubectl task %s nightly-report -n reports", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := a.taskArg(0, args[0])
			if err != nil {
				return err
			}
			task, err := c.getTask(cmd.Context(), key)
			if err != nil {
				return err
			}
			if ptr.Deref(task.Spec.Suspend, false) == on {
				fmt.Fprintf(a.messages(), "task/%s already %s\n", key.Name, done)
			} else {
				patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, on)
				task = &v1alpha1.Task{ObjectMeta: task.ObjectMeta} // Patch reads the result into it
				if err := c.ctrl.Patch(cmd.Context(), task, client.RawPatch("application/merge-patch+json", patch)); err != nil {
					return fmt.Errorf("setting spec.suspend of task/%s: %w", key.Name, err)
				}
				fmt.Fprintf(a.messages(), "task/%s %s\n", key.Name, done)
			}
			if a.output != "" {
				return a.printTask(cmd.Context(), task)
			}
			return nil
		},
	}
	a.addOutputFlag(cmd, printsTask)
	return cmd
}
