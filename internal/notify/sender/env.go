package sender

import (
	"fmt"
	"strings"

	"github.com/taskops/task-operator/internal/httprunner"
	"github.com/taskops/task-operator/internal/notify"
)

// EnvTerminationLog overrides where the result is written for the kubelet
// (tests): the http runner's variable.
const EnvTerminationLog = httprunner.EnvTerminationLog

// httpPrefix is what the http runner's variables start with.
const httpPrefix = "TASK_HTTP_"

// targetEnv is getenv as the http runner's parser sees target i: its
// TASK_HTTP_* names read the target's variables, and method, body and
// timeout are the sender's.
func targetEnv(getenv func(string) string, i int, body string) func(string) string {
	prefix := notify.TargetPrefix(i)
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
