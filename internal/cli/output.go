package cli

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// outputFormats are the values of -o/--output, as kubectl names them.
var outputFormats = []string{"json", "yaml", "name"}

// addOutputFlag adds -o/--output to a command that ends with a Task: with
// it, stdout holds only the Task as it finished (the object, as `kubectl
// get -o` prints it), and every message goes to stderr, so CI can pipe it
// (`kubectl task run -f t.yaml --wait -o json | jq .status.phase`).
func (a *app) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&a.output, "output", "o", "", "print the Task when done, as json, yaml or name (messages go to stderr)")
}

func (a *app) checkOutput() error {
	if a.output == "" {
		return nil
	}
	for _, f := range outputFormats {
		if a.output == f {
			return nil
		}
	}
	return usageErrorf("--output must be one of json, yaml or name, got %q", a.output)
}

// printTask prints the Task to stdout in the -o format.
func (a *app) printTask(t *v1alpha1.Task) error {
	t = t.DeepCopy()
	t.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Task"))
	t.ManagedFields = nil // as kubectl, without --show-managed-fields
	var p printers.ResourcePrinter
	switch a.output {
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	default:
		p = &printers.NamePrinter{}
	}
	return p.PrintObj(t, a.out())
}

// messages is where a command's messages go: stdout, unless -o reserves
// it for the object.
func (a *app) messages() io.Writer {
	if a.output != "" {
		return a.errOut()
	}
	return a.out()
}
