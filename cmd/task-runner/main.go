// Command task-runner runs the work of a Task inside its Job's pod. It has
// two subcommands: `http` makes the request of an http Task (see
// docs/http-tasks.md), and `notify` sends a run's notification from a
// notification Job (docs/notifications.md). The logic lives in
// internal/httprunner and internal/notify so it can be tested without a
// process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskops/task-operator/internal/httprunner"
	"github.com/taskops/task-operator/internal/notify/sender"
)

const usage = `usage: task-runner http | task-runner notify

Makes the one HTTP request described by the TASK_HTTP_* environment
variables (set by task-operator from the Task's spec.url and spec.http),
prints a summary and exits with a code saying what happened:
0 success, 1 unexpected status, 2 bad request definition (not retried),
3 timeout, 4 connection error, 5 TLS error, 6 too many redirects,
7 other request failure, 8 interrupted.

task-runner notify posts the run outcome in TASK_NOTIFY_DOCUMENT to the
webhooks TASK_NOTIFY_TARGETS lists, each tried at most 3 times: exit 0
when every webhook accepted it, 1 when one did not, 2 for a bad definition.
`

func main() {
	if len(os.Args) == 2 && os.Args[1] == "notify" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := sender.Sender{}.Run(ctx, os.Getenv, os.Stdout)
		stop()
		os.Exit(code)
	}
	if len(os.Args) != 2 || os.Args[1] != "http" {
		fmt.Fprint(os.Stderr, usage)
		// Also leave a termination message: a Job started with a wrong
		// command should say why in the Task status, not only in its log.
		what := "no subcommand given"
		if len(os.Args) > 1 {
			what = fmt.Sprintf("unknown arguments %q", os.Args[1:])
		}
		msg := httprunner.Failure(httprunner.ExitBadDefinition, what+`: usage is "task-runner http"`).Summary()
		httprunner.WriteTerminationMessage(httprunner.TerminationLogPath(os.Getenv), msg)
		os.Exit(httprunner.ExitBadDefinition)
	}

	// SIGTERM is how the kubelet stops the pod (a suspended Job, a deleted
	// Task): cancel the request so the summary still gets written.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := httprunner.Run(ctx, os.Getenv, os.Stdout)
	stop()
	os.Exit(code)
}
