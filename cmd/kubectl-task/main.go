// Command kubectl-task is the `kubectl task` plugin: it creates, triggers,
// waits for and inspects Tasks (batch.taskops.io/v1alpha1) from CI
// pipelines. Put it on PATH and call it as `kubectl task ...`; see
// docs/kubectl-task.md.
//
// Exit codes: 0 success, 1 the Task or run failed, 2 timeout, 3 usage or
// other errors, 4 the run was cancelled (run --wait and trigger --wait
// cancel their Task's runs when interrupted, unless --detach).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/taskops/task-operator/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
