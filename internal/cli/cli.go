// Package cli implements `kubectl task`, a kubectl plugin that creates,
// triggers, waits for and inspects Tasks from CI pipelines.
//
// Every command writes to the io.Writers it is given and ends in an exit
// code, so tests (and cmd/kubectl-task) call Run directly:
//
//	0  success: the Task (or the run) succeeded, or the command did its job
//	1  the Task or the run waited for failed (or was stopped)
//	2  --timeout elapsed before the Task or run finished
//	3  usage and every other error (bad flags, Task not found, API errors)
//	4  the run waited for was cancelled (a cancel token; run --wait and
//	   trigger --wait set one when interrupted)
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// Exit codes of every command.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitTimeout = 2
	ExitError   = 3
	// ExitCancelled: the run waited for was cancelled, by someone's cancel
	// token or by this plugin when interrupted.
	ExitCancelled = 4
)

// DefaultTimeout is how long `wait`, `run --wait` and `trigger --wait` wait
// unless --timeout says otherwise.
const DefaultTimeout = 30 * time.Minute

// exitError carries an exit code through cobra. When printed is true the
// command already told the user what happened.
type exitError struct {
	code    int
	err     error
	printed bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode is an error that ends the command with code after the command
// itself printed the explanation.
func exitCode(code int) error { return &exitError{code: code, printed: true} }

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// app is one invocation of the plugin: its streams, its kubeconfig flags
// and the clients built from them.
type app struct {
	streams     genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags

	// now and newToken are replaceable for tests.
	now      func() time.Time
	newToken func() string

	clients *clients

	// output is -o/--output of the command running (output.go).
	output string
}

// clients talk to the cluster of the selected kubeconfig context.
type clients struct {
	ctrl client.WithWatch
	kube kubernetes.Interface
	// namespace is -n, else the context's namespace, else "default";
	// explicitNamespace says whether -n chose it.
	namespace         string
	explicitNamespace bool
}

// Run runs `kubectl task` with args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	// controller-runtime warns on stderr when its logger is never set.
	ctrllog.SetLogger(logr.Discard())

	a := &app{
		streams:     streams,
		configFlags: genericclioptions.NewConfigFlags(true),
		now:         time.Now,
		newToken:    newRunNowToken,
	}
	return a.run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.streams.In)
	root.SetOut(a.streams.Out)
	root.SetErr(a.streams.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	return a.report(cmd, err)
}

// report prints err (unless already printed) and maps it to an exit code;
// cmd is the command that ran (or failed to parse).
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.printed && ee.err != nil {
			fmt.Fprintf(a.streams.ErrOut, "error: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(a.streams.ErrOut, "error: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		fmt.Fprintf(a.streams.ErrOut, "See '%s --help' for usage.\n", displayName(cmd))
	}
	return ExitError
}

// isCobraUsageError recognises the errors cobra returns for unknown commands
// and wrong argument counts, which are plain errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func displayName(c *cobra.Command) string {
	if c == nil {
		return "kubectl task"
	}
	return c.CommandPath()
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-task",
		Short: "Create, trigger, wait for and inspect Tasks (batch.taskops.io)",
		Long: `kubectl task creates, triggers, waits for and inspects Tasks
(batch.taskops.io/v1alpha1) from the command line and from CI pipelines.

Exit codes:
  0  success
  1  the Task or run failed (or was stopped)
  2  --timeout elapsed before the Task or run finished
  3  usage or any other error (Task not found, API errors, ...)
  4  the run was cancelled (run --wait and trigger --wait cancel their
     Task's runs when interrupted, unless --detach)`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl task",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		// `kubectl task completion bash|zsh|fish|powershell`.
		CompletionOptions: cobra.CompletionOptions{},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err: err}
	})
	// Every verb with -o refuses an unknown format before it does anything.
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return a.checkOutput() }
	a.configFlags.AddFlags(root.PersistentFlags())

	root.AddCommand(
		a.runCommand(),
		a.waitCommand(),
		a.cancelCommand(),
		a.logsCommand(),
		a.historyCommand(),
		a.resultsCommand(),
		a.chainCommand(),
		a.backfillCommand(),
		a.queueCommand(),
		a.suspendCommand(true),
		a.suspendCommand(false),
		a.versionCommand(),
	)
	a.withCompletion(root)
	return root
}

// getClients builds (once) the clients for the kubeconfig flags.
func (a *app) getClients() (*clients, error) {
	if a.clients != nil {
		return a.clients, nil
	}
	cfg, err := a.configFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kubectl-task"
	}
	ns, explicit, err := a.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	if ns == "" {
		ns = "default"
	}
	ctrlClient, err := client.NewWithWatch(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	a.clients = &clients{ctrl: ctrlClient, kube: kube, namespace: ns, explicitNamespace: explicit}
	return a.clients, nil
}

// errOut is where progress and errors go.
func (a *app) errOut() io.Writer { return a.streams.ErrOut }

// out is where results go.
func (a *app) out() io.Writer { return a.streams.Out }

// newScheme knows the built-in types and Tasks.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}
