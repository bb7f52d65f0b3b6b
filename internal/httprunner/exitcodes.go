// Package httprunner is the http Task runner: it makes the one HTTP request
// described by the TASK_HTTP_* environment variables the operator sets on the
// Job's container, prints a short redacted summary (to stdout and to the
// termination message file) and returns an exit code that tells the operator
// what happened.
//
// The runner makes exactly one request per attempt (redirects aside): retries
// are the operator's job (spec.maxRetry, spec.backoff), so that every attempt
// is visible as its own Job and no request is repeated behind the user's back.
package httprunner

// Exit codes. They are part of the user-facing contract (docs/http-tasks.md):
// the operator gives ExitBadDefinition and (unless spec.http.retryAllFailures)
// ExitClientError a special meaning, never retried; every other non-zero code
// is an ordinary failed attempt, but distinct codes let users and alerts tell
// a flaky network from a wrong status at a glance.
const (
	// ExitSuccess: a response arrived with a success code and its body
	// excerpt was read within the timeout.
	ExitSuccess = 0
	// ExitUnexpectedStatus: a response arrived but its status code is not
	// in the success codes (default: any 2xx), and is not a client error
	// (ExitClientError).
	ExitUnexpectedStatus = 1
	// ExitBadDefinition: the request cannot be made as defined (missing or
	// malformed URL, bad method, header, success codes or timeout, unknown
	// subcommand). Retrying cannot help, so the operator does not retry.
	ExitBadDefinition = 2
	// ExitTimeout: no complete response (status and body excerpt) within
	// timeoutSeconds.
	ExitTimeout = 3
	// ExitConnection: the server could not be reached or dropped the
	// connection: DNS failure, connection refused or reset, unreachable
	// network, connection closed before the response was complete.
	ExitConnection = 4
	// ExitTLS: the TLS handshake failed, typically an untrusted or
	// mismatched certificate (certificates are always verified).
	ExitTLS = 5
	// ExitTooManyRedirects: the server redirected more than MaxRedirects
	// times.
	ExitTooManyRedirects = 6
	// ExitRequestFailed: any other failure to complete the exchange, such
	// as a malformed HTTP response.
	ExitRequestFailed = 7
	// ExitInterrupted: the runner was asked to stop (SIGTERM or SIGINT, e.g.
	// the attempt's Job was suspended) before the request completed.
	ExitInterrupted = 8
	// ExitClientError: an unexpected 4xx status other than 408, 425 and
	// 429: the request itself is wrong (404, 401, 422, ...), so sending it
	// again cannot help. The operator does not retry it unless
	// spec.http.retryAllFailures.
	ExitClientError = 9
)

// retryableClientErrors are the 4xx statuses that say "try again later"
// rather than "this request is wrong": Request Timeout, Too Early, Too Many
// Requests.
var retryableClientErrors = map[int]bool{408: true, 425: true, 429: true}

// unexpectedStatusExit is the exit code of a status the success codes do not
// list.
func unexpectedStatusExit(status int) int {
	if status >= 400 && status < 500 && !retryableClientErrors[status] {
		return ExitClientError
	}
	return ExitUnexpectedStatus
}

// ExitName is the short human name of an exit code, used in the summary's
// first line so the termination message reads on its own.
func ExitName(code int) string {
	switch code {
	case ExitSuccess:
		return "success"
	case ExitUnexpectedStatus:
		return "unexpected status"
	case ExitBadDefinition:
		return "bad request definition"
	case ExitTimeout:
		return "timeout"
	case ExitConnection:
		return "connection error"
	case ExitTLS:
		return "TLS error"
	case ExitTooManyRedirects:
		return "too many redirects"
	case ExitRequestFailed:
		return "request failed"
	case ExitInterrupted:
		return "interrupted"
	case ExitClientError:
		return "client error"
	default:
		return "failure"
	}
}
