package fuzz_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/httprunner"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
)

// admission is what happened to one spec on its way in: the API server's
// verdict (server-side dry-run), and for an accepted spec what the
// reconciler would make of it: its schedule, its Job (dry-run too) and, for
// an http Task, the runner's reading of that Job's environment.
type admission struct {
	verdict verdict
	// refused is the API server's refusal of the Task.
	refused error
	// task is the accepted Task as the operator decodes it.
	task *v1alpha1.Task
	// parseErr is scheduler.Parse's error (InvalidSchedule).
	parseErr error
	// jobErr is the API server's refusal of the Job (InvalidSpec).
	jobErr error
	// podErr is the API server's refusal of the Job's pod, which the Job
	// controller creates: the attempt then ends with StartTimeout.
	podErr error
	// runnerErr is the runner's refusal of the request (NotRetryable).
	runnerErr error
}

// reportedInvalid is the reason the reconciler must report for the spec,
// or "" when it can act on it.
func (a admission) reportedInvalid() v1alpha1.Reason {
	switch {
	case a.parseErr != nil:
		return v1alpha1.ReasonInvalidSchedule
	case a.jobErr != nil:
		return v1alpha1.ReasonInvalidSpec
	}
	return ""
}

// admit sends in's Task (named name, in namespace ns) through dry-run and
// checks the contract's admission invariants.
func admit(ctx context.Context, c *check, hs *harness, ns, name string) admission {
	c.t.Helper()
	in := c.in
	in.Name = name
	a := admission{verdict: model(in)}
	u := in.task(ns, name)
	err := hs.k8s.Create(ctx, u, client.DryRunAll)
	if err != nil {
		a.refused = err
		checkRefusal(c, err)
		if a.verdict.sure && a.verdict.valid() {
			finding := ""
			switch s := in.Schedule; {
			case in.has(bSchedule) && strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) && r != ' ' }),
				in.has(bSchedule) && strings.TrimSpace(s) != s:
				finding = "F2"
			case apierrors.IsRequestEntityTooLargeError(err):
				finding = "F4"
			}
			c.fail(finding, "a valid spec was refused at admission: %v", err)
		}
		return a
	}

	// The operator's informer decodes Tasks with the scheme's codecs.
	raw, err := json.Marshal(u.Object)
	if err != nil {
		c.t.Fatalf("encoding the accepted Task: %v", err)
	}
	task := &v1alpha1.Task{}
	if _, _, err := hs.decoder.Decode(raw, nil, task); err != nil {
		c.fail("F1", "the API server accepted a Task the operator cannot decode (its informer would fail to list Tasks): %v", err)
		return a
	}
	a.task = task
	if task.UID == "" {
		task.UID = types.UID("00000000-0000-0000-0000-000000000001")
	}

	// The schedule, as the reconciler parses it.
	var slot *time.Time
	if task.Spec.Schedule != nil {
		tz := ""
		if task.Spec.TimeZone != nil {
			tz = *task.Spec.TimeZone
		}
		var s *scheduler.Schedule
		s, a.parseErr = parseSchedule(c, *task.Spec.Schedule, tz)
		if a.parseErr != nil {
			if msg := a.parseErr.Error(); !strings.HasPrefix(msg, "spec.schedule") && !strings.HasPrefix(msg, "spec.timeZone") {
				c.fail("", "scheduler.Parse's error does not name spec.schedule or spec.timeZone: %q", msg)
			}
			c.note("reported InvalidSchedule", a.parseErr.Error())
		} else {
			next := s.Next(time.Unix(1_700_000_000, 0))
			if next.IsZero() {
				c.fail("", "an accepted schedule has no next slot")
			}
			slot = &next
		}
	}

	// The Job of the last attempt of the run (the longest name), as the
	// reconciler builds it.
	runID := runs.OneShot
	if slot != nil {
		runID = runs.ScheduledID(*slot)
	}
	job := jobs.Build(task, runID, task.Spec.MaxRetry+1, slot, nil, jobOpts)
	job.Namespace = ns
	if err := hs.k8s.Create(ctx, job, client.DryRunAll); err != nil {
		a.jobErr = err
		checkJobRefusal(c, err)
	} else {
		// The pod, as the Job controller creates it.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-0-x",
				Labels: job.Spec.Template.Labels, Annotations: job.Spec.Template.Annotations},
			Spec: *job.Spec.Template.Spec.DeepCopy(),
		}
		if err := hs.k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			if !apierrors.IsInvalid(err) {
				c.fail("", "the pod of an accepted Job was refused with %s: %v", reasonOf(err), err)
			}
			a.podErr = err
			for _, cause := range causes(err) {
				c.note("pod refused (StartTimeout: no pod was created)", normField(cause.Field)+": "+causeKind(cause))
			}
		}
		if task.Spec.Type == v1alpha1.TaskTypeHTTP {
			if _, err := httprunner.ParseEnv(jobEnv(job)); err != nil {
				a.runnerErr = err
				c.note("runner: bad definition (NotRetryable at run time)", err.Error())
			}
		}
	}
	compare(c, a)
	return a
}

// parseSchedule runs scheduler.Parse and a year of Next/Due with a time
// limit: a hang is a finding as much as a panic.
func parseSchedule(c *check, schedule, tz string) (*scheduler.Schedule, error) {
	type result struct {
		s     *scheduler.Schedule
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		s, err := scheduler.Parse(schedule, tz)
		if err == nil {
			from := time.Unix(1_700_000_000, 0)
			s.Next(from)
			s.Due(from, nil, from.Add(400*24*time.Hour))
		}
		done <- result{s: s, err: err}
	}()
	select {
	case r := <-done:
		if r.panic != "" {
			c.t.Fatalf("scheduler.Parse/Next/Due(%q, %q) panicked: %s", schedule, tz, r.panic)
		}
		return r.s, r.err
	case <-time.After(5 * time.Second):
		c.t.Fatalf("scheduler.Parse/Next/Due(%q, %q) did not return within 5s", schedule, tz)
		return nil, nil
	}
}

// checkRefusal: a refused Task gets a field error, never a 500 or an
// opaque message. The API server adds a cause without a field when some
// rules were skipped ("some validation rules were not checked because the
// object was invalid"); it goes with the real causes, which must name
// their field.
func checkRefusal(c *check, err error) {
	c.t.Helper()
	switch {
	case apierrors.IsRequestEntityTooLargeError(err):
		c.note("refused: request too large (413)", "")
		return
	case apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "cannot be handled as a Task: json: cannot unmarshal number"):
		// JSON the API server cannot decode at all (a number beyond
		// float64), before any schema: only Extra sends such JSON.
		c.note("refused: undecodable JSON number (400, before validation)", err.Error())
		return
	case !apierrors.IsInvalid(err):
		c.fail("", "the Task was refused without a field error (%s): %v", reasonOf(err), err)
		return
	}
	named := 0
	for _, cause := range causes(err) {
		switch {
		case cause.Field != "" && cause.Field != "<nil>",
			strings.Contains(cause.Message, "spec.") || strings.Contains(cause.Message, "metadata.name"):
			named++
		case strings.Contains(cause.Message, "some validation rules were not checked"):
			continue
		default:
			c.fail("", "a refusal cause names no field: %+v (in %v)", cause, err)
		}
		c.note("refused at admission", normField(cause.Field)+": "+causeKind(cause))
	}
	if named == 0 {
		c.fail("", "the refusal names no field: %v", err)
	}
}

// checkJobRefusal: the reconciler reports InvalidSpec only for an Invalid
// refusal; anything else it returns as an error and retries for ever.
func checkJobRefusal(c *check, err error) {
	c.t.Helper()
	if !apierrors.IsInvalid(err) {
		c.fail("", "the Job of an accepted Task was refused with %s, not Invalid: the reconciler would retry it in a loop instead of reporting InvalidSpec: %v", reasonOf(err), err)
		return
	}
	for _, cause := range causes(err) {
		c.note("Job refused (reported InvalidSpec)", normField(cause.Field)+": "+causeKind(cause))
	}
}

// compare holds the model against what happened to an accepted spec.
func compare(c *check, a admission) {
	c.t.Helper()
	v := a.verdict
	if !v.sure {
		return
	}
	late := a.parseErr != nil || a.jobErr != nil || a.podErr != nil || a.runnerErr != nil
	for _, p := range v.problems {
		caught, where := false, ""
		switch p.stage {
		case atAdmission:
			caught, where = late, "later"
		case atSchedule:
			caught, where = a.parseErr != nil, "InvalidSchedule"
		case atJob:
			caught, where = a.jobErr != nil || a.parseErr != nil, "InvalidSpec"
		case atPod:
			caught, where = a.podErr != nil || a.jobErr != nil || a.parseErr != nil, "StartTimeout (the pod is refused)"
		case atRuntime:
			caught, where = a.runnerErr != nil || a.jobErr != nil || a.parseErr != nil, "NotRetryable at run time"
		}
		switch {
		case !caught:
			c.fail(uncaughtFinding(p), "an invalid spec (%s) was accepted and nothing reports it", p)
		case p.stage == atPod && a.podErr != nil && a.jobErr == nil && a.parseErr == nil:
			c.fail("F3", "a spec whose pods the API server refuses (%s) is accepted: every attempt ends with StartTimeout after startTimeoutSeconds instead of InvalidSpec: %v", p, a.podErr)
		case p.cel:
			c.note("missing CRD rule (CEL could refuse it)", fmt.Sprintf("%s: accepted, then %s", p.id, where))
		default:
			c.note("reported after admission (no practical CRD rule)", fmt.Sprintf("%s: %s", p.id, where))
		}
	}
	if a.parseErr != nil && len(v.at(atSchedule)) == 0 && len(v.at(atAdmission)) == 0 {
		c.fail("", "the reconciler's parser refuses a schedule the model finds valid: %v", a.parseErr)
	}
	if a.jobErr != nil && len(v.at(atJob)) == 0 && len(v.at(atAdmission)) == 0 {
		for _, cause := range causes(a.jobErr) {
			if !hasPrefixAny(cause.Field, v.jobMaybe) {
				c.fail("", "the Job of a spec the model finds valid was refused: %v", a.jobErr)
				break
			}
		}
	}
	if a.podErr != nil && len(v.at(atPod)) == 0 && len(v.at(atAdmission)) == 0 {
		c.fail("", "the pod of a spec the model finds valid was refused: %v", a.podErr)
	}
	if a.runnerErr != nil && len(v.at(atRuntime)) == 0 && len(v.at(atAdmission)) == 0 {
		c.fail("", "the runner refuses the request of a spec the model finds valid: %v", a.runnerErr)
	}
}

// uncaughtFinding maps an invalid spec nothing reports to a known finding.
func uncaughtFinding(p problem) string {
	switch p.id {
	case "resources/not-a-quantity":
		return "F1" // fixed: fails
	case "image/not-a-reference":
		return "F3"
	}
	return ""
}

// jobEnv is getenv for the Job's container as the kubelet would set it up:
// the operator's literal values come back from the kubelet's "$$" -> "$"
// unescaping; Secret values are unknown here.
func jobEnv(job *batchv1.Job) func(string) string {
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil {
			env[e.Name] = "secret-value"
			continue
		}
		env[e.Name] = strings.ReplaceAll(e.Value, "$$", "$")
	}
	return func(k string) string { return env[k] }
}

func causes(err error) []metav1.StatusCause {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return nil
	}
	return se.Status().Details.Causes
}

func reasonOf(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return fmt.Sprintf("%s/%d", se.Status().Reason, se.Status().Code)
	}
	return "not an API status"
}

// normField drops list indexes, so similar causes group.
func normField(f string) string { return digits.ReplaceAllString(f, "[*]") }

// causeKind is the kind of a cause's message without the value.
func causeKind(cause metav1.StatusCause) string {
	m := cause.Message
	if i := strings.Index(m, "Invalid value: "); i >= 0 {
		if j := strings.LastIndex(m, ": "); j > i+len("Invalid value: ") {
			return "Invalid value: " + short(m[j+2:])
		}
	}
	return string(cause.Type) + " " + short(m)
}

func hasPrefixAny(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
