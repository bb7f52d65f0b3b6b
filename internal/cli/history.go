package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
)

// messageWidth is where history cuts messages unless --no-trunc.
const messageWidth = 60

func (a *app) historyCommand() *cobra.Command {
	var noTrunc, attempts, watching bool
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Print the Task's runs (status.history), newest first",
		Long: `Print the Task's runs from status.history, newest first (the operator keeps
the last 10): run id, result, attempts, start and end (UTC, RFC 3339), how
long the run took (so far, while Running) and its message, cut to one line
of 60 characters unless --no-trunc.

With --attempts, print the attempts of the newest run instead
(status.attemptRecords): attempt, Job, result and reason, exit code, start,
end and message; they stay after the attempts' Jobs are pruned.

With -w/--watch, print the runs and then, as kubectl get -w does, a row
for each run that starts or changes, until interrupted or the Task is
deleted.`,
		Example: `  kubectl task history nightly-report -n ops
  kubectl task history build -n ci --attempts
  kubectl task history nightly-report -n ops --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempts && a.output != "" {
				return usageErrorf("--attempts prints a table; -o prints the runs (kubectl get task NAME -o jsonpath='{.status.attemptRecords}' prints the attempts)")
			}
			c, err := a.getClients()
			if err != nil {
				return err
			}
			key := types.NamespacedName{Namespace: c.namespace, Name: args[0]}
			if watching {
				if attempts {
					return usageErrorf("--watch prints the runs; --attempts is not watched")
				}
				return a.watchHistory(cmd.Context(), c, key, noTrunc)
			}
			return a.history(cmd.Context(), c, key, noTrunc, attempts)
		},
	}
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "print messages in full (still on one line)")
	cmd.Flags().BoolVar(&attempts, "attempts", false, "print the attempts of the newest run instead of the runs")
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "after the runs, print a row for each run that starts or changes")
	a.addOutputFlag(cmd, "the runs: a List of TaskRunViews (cli.taskops.io/v1alpha1) for json, yaml and jsonpath=, run/ID lines for name, the table with every column for wide")
	return cmd
}

// history prints the Task's runs, or with attempts the newest run's
// attempts.
func (a *app) history(ctx context.Context, c *clients, key types.NamespacedName, noTrunc, attempts bool) error {
	task, err := c.getTask(ctx, key)
	if err != nil {
		return err
	}
	switch {
	case attempts && len(task.Status.AttemptRecords) == 0:
		fmt.Fprintf(a.errOut(), "No attempts recorded for task/%s yet.\n", key.Name)
		return nil
	case attempts:
		fmt.Fprintf(a.errOut(), "run %s of task/%s:\n", task.Status.CurrentRun, key.Name)
		return printAttempts(a.out(), task.Status.AttemptRecords, noTrunc)
	case a.output != "":
		return a.printRunViews(historyViews(task), true) // an empty List when none
	case len(task.Status.History) == 0:
		fmt.Fprintf(a.errOut(), "No runs recorded for task/%s yet.\n", key.Name)
		return nil
	}
	return printRunTable(a.out(), historyViews(task), a.now(), tableOptions{noTrunc: noTrunc, header: true})
}

// watchHistory prints the runs, then a row for each run that starts or
// changes, until ctx ends or the Task is deleted. With -o json|yaml each
// run is printed as one TaskRunView, as kubectl get -w -o json prints one
// object per change.
func (a *app) watchHistory(ctx context.Context, c *clients, key types.NamespacedName, noTrunc bool) error {
	printed := map[string]string{} // run id -> the row last printed
	header := true
	err := watchTask(ctx, c.ctrl, key, func(task *v1alpha1.Task) bool {
		var changed []cliv1alpha1.TaskRunView
		// After the first listing (newest first, as without --watch), the
		// changed runs oldest first: the rows read in the order they happened.
		views := historyViews(task)
		for i := len(views) - 1; i >= 0; i-- {
			v := views[i]
			row := fmt.Sprint(v.Phase, v.Attempts, v.StartTime, v.CompletionTime, v.Message)
			if printed[v.RunID] != row {
				printed[v.RunID] = row
				changed = append(changed, v)
			}
		}
		if header {
			slices.Reverse(changed)
		}
		switch {
		case a.output == "" && (len(changed) > 0 || header):
			_ = printRunTable(a.out(), changed, a.now(), tableOptions{noTrunc: noTrunc, header: header})
		case a.output == "name" || a.output == "wide":
			_ = a.printRunViews(changed, header)
		default:
			for i := range changed {
				_ = a.printRunView(&changed[i])
			}
		}
		header = false
		return false
	})
	switch {
	case errors.Is(err, errTaskDeleted):
		fmt.Fprintf(a.errOut(), "task/%s was deleted\n", key.Name)
		return nil
	case ctx.Err() != nil:
		return nil // interrupted: the end of a watch, not a failure
	}
	return err
}

// printAttempts prints attempt records as a table.
func printAttempts(w io.Writer, recs []v1alpha1.AttemptRecord, noTrunc bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tJOB\tRESULT\tREASON\tEXIT\tSTARTED\tFINISHED\tMESSAGE")
	for i := range recs {
		r := &recs[i]
		result, reason, exit := string(r.Result), string(r.Reason), "-"
		if result == "" {
			result = "Running"
		}
		if reason == "" {
			reason = "-"
		}
		if r.ExitCode != nil {
			exit = strconv.Itoa(int(*r.ExitCode))
		}
		msg := messageCell(r.Message, noTrunc)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Attempt, r.JobName, result, reason, exit,
			formatTime(r.StartTime), formatTime(r.CompletionTime), msg)
	}
	return tw.Flush()
}

// messageCell is a message on one line, cut at messageWidth unless noTrunc;
// "-" when empty.
func messageCell(msg string, noTrunc bool) string {
	width := messageWidth
	if noTrunc {
		width = 0
	}
	if msg = oneLine(msg, width); msg == "" {
		return "-"
	}
	return msg
}
