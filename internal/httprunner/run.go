package httprunner

import (
	"context"
	"io"
	"os"
)

// Run is the whole `task-runner http` command: parse the environment, make
// the request once, report, and return the exit code. ctx should be
// cancelled on SIGTERM so a stopped attempt still leaves a summary.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) int {
	var res Result
	if req, err := ParseEnv(getenv); err != nil {
		res = Failure(ExitBadDefinition, err.Error())
	} else {
		res = Do(ctx, nil, req)
	}
	Report(getenv, stdout, res.Summary(), resultDataLine(res)+resultsBlock(res.Results))
	return res.ExitCode
}

// Failure is a Result for a failure that happened before any request, such
// as a bad definition or an unknown subcommand. msg must not contain
// secrets: there is nothing to mask them with.
func Failure(code int, msg string) Result {
	return Result{ExitCode: code, Err: msg, ContentLength: -1}
}

// Report writes the summary to stdout (the pod's log) and to the termination
// message file, where the kubelet picks it up for the pod status and the
// operator for the Task status; the structured line and the results block
// (data, possibly empty, see ResultDataPrefix and internal/results) go
// last, into the termination message only: the kubelet keeps its last 4096
// bytes, so they survive a long summary.
func Report(getenv func(string) string, stdout io.Writer, summary, data string) {
	WriteTerminationMessage(TerminationLogPath(getenv), summary+data)
	_, _ = io.WriteString(stdout, summary)
}

// TerminationLogPath is EnvTerminationLog when set, else
// DefaultTerminationLog.
func TerminationLogPath(getenv func(string) string) string {
	if p := getenv(EnvTerminationLog); p != "" {
		return p
	}
	return DefaultTerminationLog
}

// WriteTerminationMessage writes msg to path. A failure is ignored on
// purpose: outside Kubernetes (running the runner by hand) the file usually
// cannot be created, and the same text is on stdout anyway, which the
// kubelet falls back to (terminationMessagePolicy FallbackToLogsOnError).
func WriteTerminationMessage(path, msg string) {
	_ = os.WriteFile(path, []byte(msg), 0o644)
}
