package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// outputFormats are the values of -o/--output, as kubectl names them;
// jsonpath=TEMPLATE is the one with an argument.
var outputFormats = []string{"json", "yaml", "name", "wide"}

const jsonpathPrefix = "jsonpath="

// addOutputFlag adds -o/--output to a command that ends with a Task: with
// it, stdout holds only the Task as it finished (the object, as `kubectl
// get -o` prints it), and every message goes to stderr, so CI can pipe it
// (`kubectl task run -f t.yaml --wait -o json | jq .status.phase`).
func (a *app) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&a.output, "output", "o", "",
		"print the Task when done, as json, yaml, name, wide (the row `kubectl get tasks -o wide` prints) or jsonpath=TEMPLATE; messages go to stderr")
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
	t = t.DeepCopy()
	t.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Task"))
	t.ManagedFields = nil // as kubectl, without --show-managed-fields
	var p printers.ResourcePrinter
	switch a.output {
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	case "name":
		p = &printers.NamePrinter{}
	default:
		jp, err := printers.NewJSONPathPrinter(strings.TrimPrefix(a.output, jsonpathPrefix))
		if err != nil {
			return err
		}
		jp.AllowMissingKeys(true) // as kubectl get -o jsonpath
		p = jp
	}
	return p.PrintObj(t, a.out())
}

// printRun prints a run's history entry in the -o format: its results are
// at .results (-o jsonpath='{.results.version}').
func (a *app) printRun(rec *v1alpha1.RunRecord) error {
	return a.printValue("run/"+rec.RunID, rec)
}

// printValue prints something that is not an API object (a run's entry, a
// results map) as json, yaml or jsonpath=TEMPLATE; name prints name.
func (a *app) printValue(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	switch a.output {
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "    "); err != nil {
			return err
		}
		buf.WriteString("\n")
		_, err = a.out().Write(buf.Bytes())
		return err
	case "yaml":
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = a.out().Write(y)
		return err
	case "name", "wide":
		_, err := fmt.Fprintln(a.out(), name)
		return err
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return err
	}
	jp := jsonpath.New("output").AllowMissingKeys(true) // as kubectl get -o jsonpath
	if err := jp.Parse(strings.TrimPrefix(a.output, jsonpathPrefix)); err != nil {
		return err
	}
	return jp.Execute(a.out(), data)
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
