package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func (a *app) runCommand() *cobra.Command {
	var (
		file    string
		wait    bool
		detach  bool
		timeout time.Duration
		values  []string
		token   string
	)
	cmd := &cobra.Command{
		Use:   "run (-f FILE | NAME [--param NAME=VALUE]...) [--wait] [--timeout DURATION]",
		Short: "Create the Task in FILE, or start a run of Task NAME with values, and optionally wait for it",
		Long: `With -f: create the Task in FILE (YAML or JSON, one Task; '-' reads stdin).

With NAME: start one run of the existing Task NAME, as 'kubectl task
trigger' does, with the values --param gives (spec.params; the others get
their defaults), written with the run-now token in one patch. With --wait,
-o prints that run's history entry, results included:
-o jsonpath='{.results.version}' prints one result.

The namespace is the file's metadata.namespace, else -n/--namespace, else the
kubeconfig context's namespace, else "default". metadata.generateName works:
each call then creates a new Task, which suits CI pipelines.

With --wait, wait for the Task to finish as 'kubectl task wait' does. When
interrupted (SIGINT, SIGTERM: the CI job was cancelled) it cancels the
Task's runs before it exits (exit code 4), unless --detach.`,
		Example: `  # Create a Task and wait up to 10 minutes for it
  kubectl task run -f task.yaml --wait --timeout 10m

  # From stdin, in namespace ci
  cat task.yaml | kubectl task run -n ci -f -

  # Re-run the report for a past date and print the rows it wrote
  kubectl task run nightly-report --param date=2026-11-30 --wait -o jsonpath='{.results.rows}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if file != "" {
					return usageErrorf("give -f FILE (create a Task) or NAME (run an existing one), not both")
				}
				if err := checkToken(cmd, token); err != nil {
					return err
				}
				return a.startRun(cmd, args[0], runRequest{token: token, printsRun: true}, values, wait, detach, timeout)
			}
			if cmd.Flags().Changed("run-now-token") {
				return usageErrorf("--run-now-token starts a run of an existing Task: kubectl task run NAME --run-now-token TOKEN (a Task created with -f starts its first run by itself)")
			}
			if file == "" {
				return usageErrorf("-f/--filename or a Task NAME is required")
			}
			if len(values) > 0 {
				return usageErrorf("--param gives values to a run of an existing Task: kubectl task run NAME --param NAME=VALUE")
			}
			if err := a.checkOutput(); err != nil {
				return err
			}
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			task, err := readTask(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := a.getClients()
			if err != nil {
				return err
			}
			switch {
			case task.Namespace == "":
				task.Namespace = c.namespace
			case c.explicitNamespace && task.Namespace != c.namespace:
				return fmt.Errorf("the namespace of %s (%q) does not match --namespace %q",
					file, task.Namespace, c.namespace)
			}
			start := a.now()
			if err := c.ctrl.Create(cmd.Context(), task, client.FieldValidation("Strict")); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("%w\nhint: re-run an existing Task with 'kubectl task trigger %s', or use metadata.generateName to create a new Task each time",
						err, task.Name)
				}
				return fmt.Errorf("creating the Task from %s: %w", file, err)
			}
			fmt.Fprintf(a.messages(), "task/%s created in namespace %s\n", task.Name, task.Namespace)
			if !wait {
				if a.output != "" {
					return a.printTask(cmd.Context(), task)
				}
				return nil
			}
			key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
			return a.waitOrCancel(cmd.Context(), c, key, timeout, start, newTaskTracker(), detach)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file holding the Task (YAML or JSON); - for stdin")
	addParamFlag(cmd, &values)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the Task finished; the exit code tells how")
	cmd.Flags().BoolVar(&detach, "detach", false, "with --wait: when interrupted, leave the Task's runs running instead of cancelling them")
	addTokenFlag(cmd, &token)
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd)
	return cmd
}

// maxManifestBytes bounds what run reads.
const maxManifestBytes = 4 << 20

// readTask reads one Task from a YAML or JSON file ("-": in).
func readTask(file string, in io.Reader) (*v1alpha1.Task, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(in, maxManifestBytes+1))
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", file, maxManifestBytes)
	}
	return decodeTask(file, data)
}

// decodeTask decodes exactly one Task, strictly: unknown or duplicate
// fields are errors rather than silently dropped.
func decodeTask(file string, data []byte) (*v1alpha1.Task, error) {
	var docs []runtime.RawExtension
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("parsing %s: %w", file, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue // an empty YAML document
		}
		docs = append(docs, raw)
	}
	switch len(docs) {
	case 0:
		return nil, fmt.Errorf("%s holds no object", file)
	case 1:
	default:
		return nil, fmt.Errorf("%s holds %d objects; run takes exactly one Task", file, len(docs))
	}
	codecs := serializer.NewCodecFactory(newScheme(), serializer.EnableStrict)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(docs[0].Raw, nil, nil)
	if err != nil {
		if gvk != nil && gvk.Kind != "" && runtime.IsNotRegisteredError(err) {
			return nil, fmt.Errorf("%s holds a %s (%s), not a Task (%s)", file, gvk.Kind, gvk.GroupVersion(), v1alpha1.GroupVersion)
		}
		return nil, fmt.Errorf("decoding the Task in %s: %w", file, err)
	}
	task, ok := obj.(*v1alpha1.Task)
	if !ok {
		return nil, fmt.Errorf("%s holds a %s (%s), not a Task (%s)", file, gvk.Kind, gvk.GroupVersion(), v1alpha1.GroupVersion)
	}
	if task.Name == "" && task.GenerateName == "" {
		return nil, fmt.Errorf("the Task in %s has neither metadata.name nor metadata.generateName", file)
	}
	task.ResourceVersion = ""
	return task, nil
}
