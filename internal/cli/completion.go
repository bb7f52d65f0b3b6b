package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// Completion of arguments and flags: `kubectl task completion SHELL` for
// the plugin run as kubectl-task, and, through kubectl's own completion
// (kubectl 1.26+), the kubectl_complete-task script shipped beside the
// plugin, which runs `kubectl-task __complete ARGS`. Both end here: the
// verbs come from cobra, Task names, queue names and run ids from the
// cluster of the kubeconfig flags, in the namespace of -n.

// completionTimeout bounds a completion's API call: a shell waits for it.
const completionTimeout = 5 * time.Second

// completeTaskName completes the NAME argument of a verb with the Tasks of
// the namespace.
func (a *app) completeTaskName(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames(cmd, toComplete, &v1alpha1.TaskList{})
}

// completeQueueName completes the NAME argument of `queue` with the
// TaskQueues of the namespace.
func (a *app) completeQueueName(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames(cmd, toComplete, &v1alpha1.TaskQueueList{})
}

// completeRunID completes --run with the runs the Task's history records
// (newest first), once the Task's name is given.
func (a *app) completeRunID(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := a.getClients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	var t v1alpha1.Task
	if err := c.ctrl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: args[0]}, &t); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var ids []string
	for _, h := range t.Status.History {
		if strings.HasPrefix(h.RunID, toComplete) {
			ids = append(ids, h.RunID+"\t"+string(h.Result))
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// completeNames lists the names in the namespace of list's kind that start
// with toComplete.
func (a *app) completeNames(cmd *cobra.Command, toComplete string, list client.ObjectList) ([]string, cobra.ShellCompDirective) {
	c, err := a.getClients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	if err := c.ctrl.List(ctx, list, client.InNamespace(c.namespace)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if n := o.(client.Object).GetName(); strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
		return nil
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionContext is the command's context (cobra does not execute the
// completed command, so it may have none) with completionTimeout.
func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}

// withCompletion sets the completion of every verb's arguments and flags.
func (a *app) withCompletion(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "queue":
			cmd.ValidArgsFunction = a.completeQueueName
		case "version", "completion", "help":
		default:
			cmd.ValidArgsFunction = a.completeTaskName
		}
		if cmd.Flags().Lookup("run") != nil {
			_ = cmd.RegisterFlagCompletionFunc("run", a.completeRunID)
		}
	}
}
