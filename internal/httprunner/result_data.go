package httprunner

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The runner's structured result: what the operator needs of an attempt,
// as data rather than prose. It is the last line of the termination
// message, after the human summary:
//
//	task-runner-result: {"retryAfterSeconds":120}
//
// Part of the runner's contract (docs/http-tasks.md). The operator reads
// the line by its prefix and decodes the JSON; the summary above it is
// only shown to people.
const ResultDataPrefix = "task-runner-result: "

// ResultData is the structured result.
type ResultData struct {
	// RetryAfterSeconds is the server's Retry-After on a 429 or 503, in
	// seconds from the response; 0 when it sent none.
	RetryAfterSeconds int64 `json:"retryAfterSeconds,omitempty"`
}

// maxRetryAfter bounds a Retry-After the runner reports (the operator caps
// it at backoff.maxSeconds anyway).
const maxRetryAfter = 24 * time.Hour

// retryAfter reads the Retry-After header of a 429 or 503 response:
// delay-seconds or an HTTP-date, counted from now. 0 when absent, invalid
// or in the past.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now).Round(time.Second)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// resultDataLine is the structured line for r, or "" when there is nothing
// to say.
func resultDataLine(r Result) string {
	if r.RetryAfter <= 0 {
		return ""
	}
	b, err := json.Marshal(ResultData{RetryAfterSeconds: int64(r.RetryAfter / time.Second)})
	if err != nil {
		return ""
	}
	return ResultDataPrefix + string(b) + "\n"
}

// ParseResultData finds the structured line in a termination message and
// returns the message without it. ok is false when there is none (a shell
// Task, or a runner that had nothing to report).
func ParseResultData(msg string) (rest string, data ResultData, ok bool) {
	trimmed := strings.TrimRight(msg, "\n")
	i := strings.LastIndex(trimmed, "\n")
	last := trimmed[i+1:]
	if !strings.HasPrefix(last, ResultDataPrefix) {
		return msg, ResultData{}, false
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, ResultDataPrefix)), &data); err != nil {
		return msg, ResultData{}, false
	}
	if i < 0 {
		return "", data, true
	}
	return trimmed[:i+1], data, true
}
