package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/admission"
)

func (a *app) queueCommand() *cobra.Command {
	var all, watching bool
	cmd := &cobra.Command{
		Use:   "queue [NAME] [-A]",
		Short: "List a TaskQueue's attempts: those holding a place, then the line in admission order",
		Long: `List a TaskQueue's attempts: first those holding a place (admitted, their Job
running or about to be created), then the attempts waiting, in the order the
operator admits them: higher spec.priority first, then first come, first
served. POSITION is the place in the line (1 is admitted next), WAITING how
long the attempt has waited.

Without NAME, list the namespace's TaskQueues (-A/--all-namespaces: every
namespace's) with their limit, the attempts running and waiting, and
whether they admit.

With -w/--watch, print the listing again each time the places held or the
line change (it looks every 2 s), until interrupted.

-o json|yaml|name|jsonpath= prints the TaskQueue objects (a List without
NAME), as kubectl get taskqueues -o does; -o wide prints the listing.`,
		Example: `  kubectl task queue team -n ci
  kubectl task queue -A
  kubectl task queue team -n ci --watch`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.getClients()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return a.queues(cmd.Context(), c, all)
			}
			if all {
				return usageErrorf("-A lists the TaskQueues of every namespace; give no NAME with it")
			}
			key := types.NamespacedName{Namespace: c.namespace, Name: args[0]}
			if watching {
				return a.watchQueue(cmd.Context(), c, key)
			}
			return a.queue(cmd.Context(), c, key)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the TaskQueues of every namespace")
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "with NAME: print the listing again whenever the places held or the line change")
	a.addOutputFlag(cmd, "the TaskQueue (a List of them without NAME) as kubectl get -o prints it; wide: the listing")
	return cmd
}

// queues lists the TaskQueues of the namespace, or of every namespace.
func (a *app) queues(ctx context.Context, c *clients, all bool) error {
	var list v1alpha1.TaskQueueList
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(c.namespace))
	}
	if err := c.ctrl.List(ctx, &list, opts...); err != nil {
		return err
	}
	if a.printsObjects() {
		return a.printQueueObjects(&list)
	}
	if len(list.Items) == 0 {
		where := "in namespace " + c.namespace
		if all {
			where = "in any namespace"
		}
		fmt.Fprintf(a.errOut(), "No TaskQueues %s.\n", where)
		return nil
	}
	tw := tabwriter.NewWriter(a.out(), 0, 4, 2, ' ', 0)
	head := "NAME\tMAX\tRUNNING\tQUEUED\tSTATE"
	if all {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, q := range list.Items {
		state := "admitting"
		if ptr.Deref(q.Spec.Suspend, false) {
			state = "suspended"
		}
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%s", q.Name, q.Spec.MaxRunning, q.Status.Running, q.Status.Queued, state)
		if all {
			row = q.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// queuedEntry is one row of `kubectl task queue`.
type queuedEntry struct {
	w       admission.Waiting
	runID   string
	attempt int32
}

// queueView is what `kubectl task queue NAME` shows.
type queueView struct {
	tq    *v1alpha1.TaskQueue
	line  []queuedEntry
	owner map[string]string // Job name -> Task, for the places held
}

// digest is what a watch compares: the places held and the line, not the
// waiting times.
func (v *queueView) digest() string {
	var jobs []string
	for _, e := range v.line {
		jobs = append(jobs, e.w.JobName)
	}
	return fmt.Sprint(v.tq.Spec, v.tq.Status.Admitted, v.tq.Status.Running, jobs)
}

func (a *app) queue(ctx context.Context, c *clients, key types.NamespacedName) error {
	v, err := loadQueue(ctx, c, key)
	if err != nil {
		return err
	}
	return a.printQueue(a.streams.Out, v)
}

// printsObjects says whether -o asks for objects rather than the listing.
func (a *app) printsObjects() bool { return a.output != "" && a.output != "wide" }

// printQueueObjects prints TaskQueues in the -o format, as kubectl get
// taskqueues -o prints them: a List.
func (a *app) printQueueObjects(list *v1alpha1.TaskQueueList) error {
	list = list.DeepCopy()
	list.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "List"}
	list.ResourceVersion, list.Continue = "", ""
	for i := range list.Items {
		forPrinting(&list.Items[i], "TaskQueue")
	}
	return a.printObject(list)
}

// queueWatchInterval is how often --watch looks at the queue.
var queueWatchInterval = 2 * time.Second

// watchQueue prints the queue's listing, then again whenever what it
// holds or its line changes, until ctx ends (exit 0).
func (a *app) watchQueue(ctx context.Context, c *clients, key types.NamespacedName) error {
	last := ""
	for {
		v, err := loadQueue(ctx, c, key)
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: the end of a watch, not a failure
		case err != nil && last == "":
			return err
		case err == nil:
			if d := v.digest(); d != last {
				if last != "" && !a.printsObjects() {
					fmt.Fprintln(a.out())
				}
				last = d
				if err := a.printQueue(a.out(), v); err != nil {
					return err
				}
			}
		}
		if pause(ctx, queueWatchInterval) != nil {
			return nil
		}
	}
}

// loadQueue reads the TaskQueue and the Tasks naming it.
func loadQueue(ctx context.Context, c *clients, key types.NamespacedName) (*queueView, error) {
	tq := &v1alpha1.TaskQueue{}
	if err := c.ctrl.Get(ctx, key, tq); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("taskqueue %q not found in namespace %q", key.Name, key.Namespace)
		}
		return nil, err
	}
	var list v1alpha1.TaskList
	if err := c.ctrl.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
		return nil, err
	}
	owner := map[string]string{} // Job name -> Task, for the places held
	var line []queuedEntry
	for _, t := range list.Items {
		if t.Spec.QueueName != key.Name {
			continue
		}
		for _, ref := range t.Status.Active {
			owner[ref.Name] = t.Name
		}
		for _, q := range t.Status.Queued {
			owner[q.JobName] = t.Name
			if ptr.Deref(t.Spec.Suspend, false) {
				continue
			}
			if _, held := slices.BinarySearch(tq.Status.Admitted, q.JobName); held {
				continue
			}
			line = append(line, queuedEntry{
				w:     admission.Waiting{Task: t.Name, JobName: q.JobName, Priority: t.Spec.Priority, Since: q.Since.Time},
				runID: q.RunID, attempt: q.Attempt,
			})
		}
	}
	slices.SortFunc(line, func(x, y queuedEntry) int { return admission.Order(x.w, y.w) })

	return &queueView{tq: tq, line: line, owner: owner}, nil
}

// printQueue prints the queue's summary line and its places and line.
func (a *app) printQueue(out io.Writer, v *queueView) error {
	tq, line, owner := v.tq, v.line, v.owner
	if a.printsObjects() {
		return a.printObject(forPrinting(tq.DeepCopy(), "TaskQueue"))
	}
	state := "admitting"
	if ptr.Deref(tq.Spec.Suspend, false) {
		state = "suspended: admits nothing new"
	}
	fmt.Fprintf(out, "TaskQueue %s: max %d, running %d, queued %d (%s)\n", tq.Name, tq.Spec.MaxRunning, tq.Status.Running, len(line), state)
	if len(tq.Status.Admitted) == 0 && len(line) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tTASK\tRUN\tATTEMPT\tPRIORITY\tWAITING\tJOB")
	for _, name := range tq.Status.Admitted {
		task := owner[name]
		if task == "" {
			task = "?"
		}
		fmt.Fprintf(tw, "running\t%s\t\t\t\t\t%s\n", task, name)
	}
	now := a.now()
	for i, e := range line {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", i+1, e.w.Task, e.runID, e.attempt, e.w.Priority,
			now.Sub(e.w.Since).Round(time.Second), e.w.JobName)
	}
	return tw.Flush()
}
