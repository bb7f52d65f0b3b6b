package sender

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/httprunner"
	"github.com/taskops/task-operator/internal/notify"
)

const (
	// MaxAttempts is how often one webhook is tried before the
	// notification counts as failed.
	MaxAttempts = 3
	// requestTimeout bounds one try; the Job's activeDeadlineSeconds
	// (internal/jobs) leaves room for every try of every target.
	requestTimeout = 10 * time.Second
)

// Exit codes of `task-runner notify`.
const (
	ExitSent          = 0 // every target accepted the notification
	ExitNotSent       = 1 // a target refused it or could not be reached
	ExitBadDefinition = 2 // the environment does not describe a notification
)

// Sender sends one run's notification. Client and Wait are replaceable for
// tests: Wait sleeps between tries (nil: a real, cancellable sleep).
type Sender struct {
	Client *http.Client
	Wait   func(ctx context.Context, d time.Duration)
}

// backoff is the pause before try n+1 (n from 1): 1 s, then 2 s.
func backoff(n int) time.Duration { return time.Duration(1<<(n-1)) * time.Second }

// Run is the whole `task-runner notify` command: every target of
// notify.EnvTargets gets the document, each tried at most MaxAttempts times; what
// happened goes to stdout (the pod's log) and to the termination message,
// secrets masked; the exit code says whether all were sent.
func (s Sender) Run(ctx context.Context, getenv func(string) string, stdout io.Writer) int {
	doc, targets, err := parse(getenv)
	if err != nil {
		msg := "notification not sent: " + err.Error()
		report(getenv, stdout, msg+"\n", msg)
		return ExitBadDefinition
	}
	var log, summary strings.Builder
	code := ExitSent
	for _, i := range targets {
		line, ok := s.sendOne(ctx, getenv, i, doc, &log)
		summary.WriteString(line + "\n")
		if !ok {
			code = ExitNotSent
		}
	}
	report(getenv, stdout, log.String(), strings.TrimSpace(summary.String()))
	return code
}

// sendOne tells target i, trying up to MaxAttempts times; it returns the
// target's one-line summary and whether it was sent.
func (s Sender) sendOne(ctx context.Context, getenv func(string) string, i int, doc notify.Document, log *strings.Builder) (string, bool) {
	format := v1alpha1.NotifyFormat(getenv(notify.TargetPrefix(i) + notify.SuffixFormat))
	body := doc.JSON()
	switch format {
	case "", v1alpha1.NotifyFormatJSON:
		format = v1alpha1.NotifyFormatJSON
	case v1alpha1.NotifyFormatSlack:
		body = doc.Slack()
	default:
		return fmt.Sprintf("target %d: not sent: unknown format %q", i, format), false
	}
	req, err := httprunner.ParseEnv(targetEnv(getenv, i, body))
	if err != nil {
		return fmt.Sprintf("target %d (%s): not sent: %s", i, format, err), false
	}
	req.SensitiveURL, _ = strconv.ParseBool(getenv(notify.TargetPrefix(i) + notify.SuffixURLSensitive))
	if !hasHeader(req.Headers, "Content-Type") {
		req.Headers = append(req.Headers, httprunner.Header{Name: "Content-Type", Value: "application/json"})
	}
	fmt.Fprintf(log, "notification %s of run %s, target %d (%s): headers %s\n", doc.Event, doc.RunID, i, format, headerList(req.Headers))
	var res httprunner.Result
	for n := 1; n <= MaxAttempts; n++ {
		if n > 1 {
			s.wait(ctx, backoff(n-1))
		}
		res = httprunner.Do(ctx, s.Client, req)
		fmt.Fprintf(log, "notification %s of run %s, target %d (%s), attempt %d/%d:\n%s\n", doc.Event, doc.RunID, i, format, n, MaxAttempts, res.Summary())
		if res.ExitCode == httprunner.ExitSuccess {
			return fmt.Sprintf("target %d (%s): sent to %s: HTTP %d", i, format, res.URL, res.StatusCode), true
		}
		if res.ExitCode == httprunner.ExitBadDefinition || ctx.Err() != nil {
			break
		}
	}
	// The status code, not the server's status text: what a server says
	// is printed only through the runner's masking summary.
	what := res.Err
	if res.StatusCode != 0 {
		what = fmt.Sprintf("HTTP %d", res.StatusCode)
	}
	return fmt.Sprintf("target %d (%s): not sent to %s after %d attempt(s): %s", i, format, res.URL, MaxAttempts, what), false
}

func (s Sender) wait(ctx context.Context, d time.Duration) {
	if s.Wait != nil {
		s.Wait(ctx, d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// parse reads the document and the targets.
func parse(getenv func(string) string) (notify.Document, []int, error) {
	var doc notify.Document
	if err := json.Unmarshal([]byte(getenv(notify.EnvDocument)), &doc); err != nil {
		return doc, nil, fmt.Errorf("%s is not an outcome document: %v", notify.EnvDocument, err)
	}
	var targets []int
	for _, f := range strings.Split(getenv(notify.EnvTargets), ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return doc, nil, fmt.Errorf("%s must list target indexes such as 0,2", notify.EnvTargets)
		}
		targets = append(targets, i)
	}
	return doc, targets, nil
}

// headerList shows the headers sent, a Secret-backed value as Mask: so
// the log says what went out without what must stay secret.
func headerList(hs []httprunner.Header) string {
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		v := h.Value
		if h.Sensitive {
			v = httprunner.Mask
		}
		parts = append(parts, h.Name+": "+v)
	}
	return strings.Join(parts, ", ")
}

func hasHeader(hs []httprunner.Header, name string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

// report writes the log to stdout and the summary as the termination
// message (the kubelet keeps 4 KiB; the summary stays well below).
func report(getenv func(string) string, stdout io.Writer, log, summary string) {
	if len(summary) > httprunner.MaxSummaryBytes {
		summary = summary[:httprunner.MaxSummaryBytes]
	}
	httprunner.WriteTerminationMessage(httprunner.TerminationLogPath(getenv), summary)
	_, _ = io.WriteString(stdout, log)
}
