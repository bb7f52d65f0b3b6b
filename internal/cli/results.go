package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
)

func (a *app) resultsCommand() *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "results NAME [--run ID]",
		Short: "Print the results of a Task's newest finished run, or of one run",
		Long: `Print what a run handed back (spec.results): the newest finished run's
(status.results), or with --run the run ID's from the history.

Without -o: one NAME VALUE pair a line, values quoted when they hold spaces
or newlines. -o json prints the run as a TaskRunView (cli.taskops.io/v1alpha1),
its results under .results: -o jsonpath='{.results.rows}' prints one value.`,
		Example: `  kubectl task results nightly-report
  kubectl task results nightly-report --run m3f2a9c41d0 -o jsonpath='{.results.rows}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.getClients()
			if err != nil {
				return err
			}
			task, err := c.getTask(cmd.Context(), types.NamespacedName{Namespace: c.namespace, Name: args[0]})
			if err != nil {
				return err
			}
			view, err := resultsRun(task, runID)
			if err != nil {
				return err
			}
			if a.output != "" {
				return a.printRunView(view)
			}
			values := view.Results
			if len(values) == 0 {
				fmt.Fprintf(a.errOut(), "task/%s: no results\n", task.Name)
				return nil
			}
			for _, k := range slices.Sorted(maps.Keys(values)) {
				v := values[k]
				if v == "" || strings.ContainsAny(v, " \t\n\r\"'") || !strconv.CanBackquote(v) {
					v = strconv.Quote(v)
				}
				fmt.Fprintf(a.out(), "%s\t%s\n", k, v)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "the run whose results to print (an id from 'kubectl task history'); default: the newest finished run")
	a.addOutputFlag(cmd, printsRun)
	return cmd
}

// resultsRun is the run whose results to print: run id, or the newest
// finished run.
func resultsRun(t *v1alpha1.Task, id string) (*cliv1alpha1.TaskRunView, error) {
	if id == "" {
		if v := newestFinishedRunView(t); v != nil {
			return v, nil
		}
		return nil, fmt.Errorf("task/%s has no finished run yet (kubectl task wait %s waits for one)", t.Name, t.Name)
	}
	h := findRun(t, id)
	if h == nil {
		return nil, fmt.Errorf("task/%s has no run %s in its history (kubectl task history %s lists them)", t.Name, id, t.Name)
	}
	if h.Result == v1alpha1.RunResultRunning {
		return nil, fmt.Errorf("run %s of task/%s has not finished", id, t.Name)
	}
	return runView(t, h), nil
}
