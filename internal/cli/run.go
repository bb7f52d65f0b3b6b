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
		Use:     "run (-f FILE | NAME [--param NAME=VALUE]...) [--wait] [--timeout DURATION]",
		Aliases: []string{"trigger"},
		Short:   "Create the Task in FILE, or start a run of Task NAME now, and optionally wait for it",
		Long: `With -f: create the Task in FILE (YAML or JSON, one Task; '-' reads stdin).
The namespace is the file's metadata.namespace, else -n/--namespace, else
the kubeconfig context's namespace, else "default". metadata.generateName
works: each call then creates a new Task, which suits CI pipelines.

With NAME: start one run of the existing Task NAME now, by setting a new
run-now token in its batch.taskops.io/run-now annotation (a merge patch).
The run's id is "m" + the first 10 hex digits of sha256(token). The token
is a UTC timestamp plus a random suffix unless --run-now-token sets it: a
fixed token (say, the CI pipeline's id) makes the step idempotent, since
the same token again starts no second run and --wait then reports the run
that token started. --param gives the run a value for one of spec.params
(repeatable), written in the batch.taskops.io/run-params annotation in the
same patch (params without a value get their default; without --param the
annotation is removed). The run follows spec.concurrencyPolicy (Forbid: it
starts when the active run ended) and also runs while the Task is
suspended.

'kubectl task trigger' is another name for this verb.

With --wait, wait for the Task (-f) or the run (NAME) to finish: exit 0
when it succeeded, 1 when it failed or was stopped, 4 when it was
cancelled. When interrupted (SIGINT, SIGTERM: the CI job was cancelled) it
cancels the Task's runs before it exits (exit code 4), unless --detach.

-o prints the run with --wait (a TaskRunView: -o jsonpath='{.results.rows}'
prints one result), else the Task as created or triggered.`,
		Example: `  # Create a Task and wait up to 10 minutes for it
  kubectl task run -f task.yaml --wait --timeout 10m

  # From stdin, in namespace ci
  cat task.yaml | kubectl task run -n ci -f -

  # Re-run task/nightly-report and wait up to 15 minutes for that run
  kubectl task run nightly-report --wait --timeout 15m

  # Idempotent from CI: the same pipeline never starts two runs
  kubectl task run deploy-db --run-now-token "pipeline-$CI_PIPELINE_ID" --wait

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
				return a.startRun(cmd, args[0], runRequest{token: token}, values, wait, detach, timeout)
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
					return fmt.Errorf("%w\nhint: start a new run of an existing Task with 'kubectl task run %s', or use metadata.generateName to create a new Task each time",
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
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the Task (-f) or the run (NAME) finished; the exit code tells how")
	cmd.Flags().BoolVar(&detach, "detach", false, "with --wait: when interrupted, leave the Task's runs running instead of cancelling them")
	addTokenFlag(cmd, &token)
	addTimeoutFlag(cmd, &timeout)
	a.addOutputFlag(cmd, "with --wait the run (a TaskRunView, cli.taskops.io/v1alpha1; name: run/ID), else the Task")
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
