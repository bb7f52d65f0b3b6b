package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// outputFormats are the values of -o/--output, as kubectl names them;
// jsonpath=TEMPLATE is the one with an argument.
var outputFormats = []string{"json", "yaml", "name", "wide"}

const jsonpathPrefix = "jsonpath="

// Output flag texts: what -o prints for a verb about a Task, and for a
// verb about a run (a TaskRunView, api/cli/v1alpha1).
const (
	printsTask = "the Task (as kubectl get -o prints it; wide: the row kubectl get tasks -o wide prints)"
	printsRun  = "the run: a TaskRunView (cli.taskops.io/v1alpha1) for json, yaml and jsonpath=, run/ID for name, its history row for wide"
)

// addOutputFlag adds -o/--output: with it, stdout holds only what the
// verb prints (what says it), and every message goes to stderr, so CI can
// pipe it.
func (a *app) addOutputFlag(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&a.output, "output", "o", "",
		"json, yaml, name, wide or jsonpath=TEMPLATE: print "+what+"; messages go to stderr")
}

// checkOutput refuses an unknown -o, and a jsonpath template that does not
// parse, before the command does anything.
func (a *app) checkOutput() error {
	if a.output == "" || slices.Contains(outputFormats, a.output) {
		return nil
	}
	if tmpl, ok := strings.CutPrefix(a.output, jsonpathPrefix); ok {
		if _, err := printers.NewJSONPathPrinter(tmpl); err != nil {
			return usageErrorf("--output %s: %v", a.output, err)
		}
		return nil
	}
	return usageErrorf("--output must be one of json, yaml, name, wide or jsonpath=TEMPLATE, got %q", a.output)
}

// printTask prints the Task to stdout in the -o format.
func (a *app) printTask(ctx context.Context, t *v1alpha1.Task) error {
	if a.output == "wide" {
		return a.printTaskRow(ctx, t)
	}
	return a.printObject(forPrinting(t.DeepCopy(), "Task"))
}

// forPrinting readies an API object (a copy) for printing as kubectl get
// -o does: its apiVersion and kind set, no managed fields (kubectl
// without --show-managed-fields).
func forPrinting[T client.Object](obj T, kind string) T {
	obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	obj.SetManagedFields(nil)
	return obj
}

// printTaskIfAsked prints the Task, as a verb's patch left it, when -o
// asks for it.
func (a *app) printTaskIfAsked(ctx context.Context, task *v1alpha1.Task) error {
	if a.output == "" {
		return nil
	}
	return a.printTask(ctx, task)
}

// printTaskRow prints the Task as `kubectl get task NAME -o wide` does: the
// API server renders the CRD's printer columns into a Table (so the columns
// are the installed CRD's, not this plugin's idea of them), and cli-runtime
// prints it.
func (a *app) printTaskRow(ctx context.Context, t *v1alpha1.Task) error {
	path := fmt.Sprintf("/apis/%s/namespaces/%s/tasks/%s", v1alpha1.GroupVersion, t.Namespace, t.Name)
	raw, err := a.clients.kube.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading task/%s as a table: %w", t.Name, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return fmt.Errorf("reading task/%s as a table: %w", t.Name, err)
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: true}).PrintObj(&table, a.out())
}

// messages is where a command's messages go: stdout, unless -o reserves
// it for the object.
func (a *app) messages() io.Writer {
	if a.output != "" {
		return a.errOut()
	}
	return a.out()
}
