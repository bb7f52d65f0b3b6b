package notify

import (
	"fmt"
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
