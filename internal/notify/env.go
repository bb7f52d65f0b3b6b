package notify

import (
	"fmt"
	"strings"

	"github.com/taskops/task-operator/internal/httprunner"
)

// The environment of a notification Job's container: the contract between
// the Job the operator builds (internal/jobs, notification.go) and the
// sender. Target i is spec.notify[i]; its request variables are the http
// runner's (TASK_HTTP_URL, TASK_HTTP_HEADER_<j>_NAME, ...) with
// TASK_NOTIFY_<i>_ in place of TASK_HTTP_, so one parser validates both.
const (
	// EnvDocument holds the outcome document (Document.JSON).
	EnvDocument = "TASK_NOTIFY_DOCUMENT"
	// EnvTargets lists the indexes of the entries to tell, comma-separated.
	EnvTargets = "TASK_NOTIFY_TARGETS"
	// EnvTerminationLog overrides where the result is written for the
	// kubelet (tests): the http runner's variable.
	EnvTerminationLog = httprunner.EnvTerminationLog
)

// TargetPrefix starts the variables of target i.
func TargetPrefix(i int) string { return fmt.Sprintf("TASK_NOTIFY_%d_", i) }

// Per-target variables, after TargetPrefix: the URL (literal or from a
// Secret), whether it is sensitive, the format, and the headers as
// HEADER_<j>_NAME, HEADER_<j>_VALUE, HEADER_<j>_SENSITIVE.
const (
	SuffixURL          = "URL"
	SuffixURLSensitive = "URL_SENSITIVE"
	SuffixFormat       = "FORMAT"
	SuffixHeaderPrefix = "HEADER_"
)

// httpPrefix is what the http runner's variables start with.
const httpPrefix = "TASK_HTTP_"

// targetEnv is getenv as the http runner's parser sees target i: its
// TASK_HTTP_* names read the target's variables, and method, body and
// timeout are the sender's.
func targetEnv(getenv func(string) string, i int, body string) func(string) string {
	prefix := TargetPrefix(i)
	return func(name string) string {
		rest, ok := strings.CutPrefix(name, httpPrefix)
		if !ok {
			return getenv(name)
		}
		switch rest {
		case "METHOD":
			return "POST"
		case "BODY":
			return body
		case "TIMEOUT_SECONDS":
			return fmt.Sprint(int(requestTimeout.Seconds()))
		case "SUCCESS_CODES":
			return "" // any 2xx
		}
		return getenv(prefix + rest)
	}
}
