package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// maxChainDepth bounds how far `chain` follows spec.after up and down: a
// cycle (which the operator reports as InvalidSpec) must not print forever.
const maxChainDepth = 8

func (a *app) chainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "chain NAME",
		Short: "Print the Tasks a Task runs after (spec.after) and those that run after it, with each one's last run",
		Long: `Print the chain around a Task: above it the Tasks it runs after (and theirs),
below it the Tasks that run after it (and theirs), each with its newest run:
its id, result and when it finished. A Task named but missing says so; a
cycle is printed once and marked.`,
		Example: `  kubectl task chain report`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.getClients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			task, err := c.getTask(ctx, types.NamespacedName{Namespace: c.namespace, Name: args[0]})
			if err != nil {
				return err
			}
			var list v1alpha1.TaskList
			if err := c.ctrl.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
				return fmt.Errorf("listing the Tasks of namespace %s: %w", c.namespace, err)
			}
			byName := map[string]*v1alpha1.Task{}
			for i := range list.Items {
				byName[list.Items[i].Name] = &list.Items[i]
			}
			byName[task.Name] = task
			printChain(a.out(), task, byName, a.now())
			return nil
		},
	}
}

// printChain prints the upstream Tasks (indented up), the Task, and the
// downstream Tasks (indented down).
func printChain(out io.Writer, task *v1alpha1.Task, byName map[string]*v1alpha1.Task, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	defer w.Flush()
	upstream := func(t *v1alpha1.Task) []string {
		var out []string
		for _, a := range t.Spec.After {
			out = append(out, a.Task)
		}
		return out
	}
	downstream := func(t *v1alpha1.Task) []string {
		var out []string
		for name, d := range byName {
			if slices.ContainsFunc(d.Spec.After, func(a v1alpha1.TaskAfter) bool { return a.Task == t.Name }) {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	if len(task.Spec.After) > 0 {
		fmt.Fprintln(w, "runs after:")
		printBranch(w, task, upstream, byName, now, 1, map[string]bool{task.Name: true})
	}
	fmt.Fprintf(w, "%s\t%s\n", task.Name, lastRunText(task, now))
	if len(downstream(task)) > 0 {
		fmt.Fprintln(w, "runs before:")
		printBranch(w, task, downstream, byName, now, 1, map[string]bool{task.Name: true})
	}
}

// printBranch prints the Tasks next(t) names, each indented by depth and
// followed by its own branch, up to maxChainDepth.
func printBranch(w io.Writer, t *v1alpha1.Task, next func(*v1alpha1.Task) []string, byName map[string]*v1alpha1.Task, now time.Time, depth int, seen map[string]bool) {
	indent := strings.Repeat("  ", depth)
	for _, name := range next(t) {
		n, ok := byName[name]
		switch {
		case !ok:
			fmt.Fprintf(w, "%s%s\tmissing: no such Task in this namespace\n", indent, name)
		case seen[name]:
			fmt.Fprintf(w, "%s%s\t(cycle: already printed above)\n", indent, name)
		case depth >= maxChainDepth:
			fmt.Fprintf(w, "%s%s\t%s (more beyond)\n", indent, name, lastRunText(n, now))
		default:
			fmt.Fprintf(w, "%s%s\t%s\n", indent, name, lastRunText(n, now))
			seen[name] = true
			printBranch(w, n, next, byName, now, depth+1, seen)
			delete(seen, name)
		}
	}
}

// lastRunText says how a Task's newest run stands.
func lastRunText(t *v1alpha1.Task, now time.Time) string {
	if len(t.Status.History) == 0 {
		return "no run yet"
	}
	h := t.Status.History[0]
	text := fmt.Sprintf("run %s: %s", h.RunID, h.Result)
	if h.CompletionTime != nil {
		text += fmt.Sprintf(", finished %s ago", formatDuration(now.Sub(h.CompletionTime.Time)))
	}
	if len(h.Trigger) > 0 {
		var refs []string
		for _, r := range h.Trigger {
			refs = append(refs, r.Task+" run "+r.RunID)
		}
		text += " (after " + strings.Join(refs, ", ") + ")"
	}
	return text
}
