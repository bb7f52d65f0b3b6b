package httprunner

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskops/task-operator/internal/resultline"
)

// The runner's structured result is internal/resultline's line, the last
// of the termination message, after the human summary.

// ResultDataPrefix begins the structured line (resultline.Prefix).
const ResultDataPrefix = resultline.Prefix

// ResultData is the structured result (resultline.Data).
type ResultData = resultline.Data

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
	return resultline.Format(resultline.Data{RetryAfterSeconds: int64(r.RetryAfter / time.Second)})
}

// ParseResultData finds the structured line in a termination message
// (resultline.Parse).
func ParseResultData(msg string) (rest string, data ResultData, ok bool) {
	return resultline.Parse(msg)
}
