// Package resultline is the one line of data a runner writes at the end
// of its termination message and the operator reads back: the contract
// between internal/httprunner (which writes it) and internal/reconciler
// (which reads it), in a package both import, so the operator links no
// HTTP client to read it.
//
//	task-runner-result: {"retryAfterSeconds":120}
//
// Part of the runner's contract (docs/http-tasks.md). The line is found by
// its prefix and its JSON decoded; the human summary above it is only
// shown to people.
package resultline

import (
	"encoding/json"
	"strings"
)

// Prefix begins the line.
const Prefix = "task-runner-result: "

// Data is what the line carries.
type Data struct {
	// RetryAfterSeconds is the server's Retry-After on a 429 or 503, in
	// seconds from the response; 0 when it sent none.
	RetryAfterSeconds int64 `json:"retryAfterSeconds,omitempty"`
}

// Format is the line for d, newline included, or "" when d says nothing.
func Format(d Data) string {
	if d == (Data{}) {
		return ""
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	return Prefix + string(b) + "\n"
}

// Parse finds the line at the end of a termination message and returns
// the message without it. ok is false when there is none (a shell Task,
// or a runner that had nothing to report).
func Parse(msg string) (rest string, data Data, ok bool) {
	trimmed := strings.TrimRight(msg, "\n")
	i := strings.LastIndex(trimmed, "\n")
	last := trimmed[i+1:]
	if !strings.HasPrefix(last, Prefix) {
		return msg, Data{}, false
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, Prefix)), &data); err != nil {
		return msg, Data{}, false
	}
	if i < 0 {
		return "", data, true
	}
	return trimmed[:i+1], data, true
}
