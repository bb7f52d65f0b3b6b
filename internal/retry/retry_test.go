package retry

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func policy(maxRetry int32, initial, max, factor int64) Policy {
	return Policy{MaxRetry: maxRetry, InitialSeconds: initial, MaxSeconds: max, Factor: factor}
}

// attempt builds an observed attempt for the tests.
func attempt(n int32, phase runs.Phase, reason v1alpha1.Reason, finished time.Time) runs.Attempt {
	return runs.Attempt{Number: n, JobName: "job", Phase: phase, Reason: reason,
		Created: finished.Add(-time.Minute), Finished: finished}
}

func TestDelay(t *testing.T) {
	cases := []struct {
		name   string
		p      Policy
		failed int32
		want   time.Duration
	}{
		{"the first retry waits the initial delay", policy(3, 10, 300, 2), 1, 10 * time.Second},
		{"the second retry waits initial times factor", policy(3, 10, 300, 2), 2, 20 * time.Second},
		{"the fourth retry waits initial times factor cubed", policy(9, 10, 300, 2), 4, 80 * time.Second},
		{"the delay stops at the cap", policy(9, 10, 300, 2), 6, 300 * time.Second},
		{"a factor of one keeps the delay constant", policy(9, 7, 300, 1), 50, 7 * time.Second},
		{"a huge attempt number with a large factor does not overflow", policy(100, 86400, 86400, 10), 100, 86400 * time.Second},
		{"a large factor reaches the cap without overflowing", policy(100, 3, 86400, 10), 100, 86400 * time.Second},
		{"a zero initial delay retries at once", policy(3, 0, 0, 2), 3, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Delay(c.failed); got != c.want {
				t.Fatalf("Delay(%d) = %s, want %s", c.failed, got, c.want)
			}
		})
	}
}

func TestPolicyForAppliesDefaults(t *testing.T) {
	p := PolicyFor(&v1alpha1.TaskSpec{MaxRetry: 2})
	if p != policy(2, 10, 300, 2) {
		t.Fatalf("PolicyFor without backoff = %+v", p)
	}
	p = PolicyFor(&v1alpha1.TaskSpec{Backoff: &v1alpha1.Backoff{InitialSeconds: 5, MaxSeconds: 60, Factor: 3}})
	if p != policy(0, 5, 60, 3) {
		t.Fatalf("PolicyFor with backoff = %+v", p)
	}
}

func TestNext(t *testing.T) {
	failedAt := t0
	cases := []struct {
		name   string
		run    runs.Run
		p      Policy
		paused bool
		now    time.Time
		want   Step
	}{
		{
			name: "a run without attempts starts its first attempt",
			run:  runs.Run{ID: "0"},
			p:    policy(0, 10, 300, 2),
			now:  t0,
			want: Step{Kind: StartAttempt, Attempt: 1},
		},
		{
			name: "an active attempt keeps the run running",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{attempt(1, runs.Active, "", time.Time{})}},
			p:    policy(0, 10, 300, 2),
			now:  t0,
			want: Step{Kind: Running, Attempt: 1},
		},
		{
			name: "a succeeded attempt finishes the run as succeeded",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{attempt(1, runs.Succeeded, "", t0)}},
			p:    policy(0, 10, 300, 2),
			now:  t0.Add(time.Hour),
			want: Step{Kind: Succeeded, Attempt: 1, At: t0},
		},
		{
			name: "a failed attempt with retries left waits out the backoff",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, failedAt)}},
			p:    policy(2, 10, 300, 2),
			now:  failedAt.Add(9 * time.Second),
			want: Step{Kind: WaitForRetry, Attempt: 2, At: failedAt.Add(10 * time.Second), Reason: v1alpha1.AttemptPodFailed, Message: "PodFailed"},
		},
		{
			name: "the next attempt starts exactly when the backoff has passed",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, failedAt)}},
			p:    policy(2, 10, 300, 2),
			now:  failedAt.Add(10 * time.Second),
			want: Step{Kind: StartAttempt, Attempt: 2, At: failedAt.Add(10 * time.Second), Reason: v1alpha1.AttemptPodFailed, Message: "PodFailed"},
		},
		{
			name: "the backoff grows with each failed attempt",
			run: runs.Run{ID: "0", Attempts: []runs.Attempt{
				attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, failedAt.Add(-time.Hour)),
				attempt(2, runs.Failed, v1alpha1.AttemptDeadlineExceeded, failedAt)}},
			p:    policy(5, 10, 300, 3),
			now:  failedAt,
			want: Step{Kind: WaitForRetry, Attempt: 3, At: failedAt.Add(30 * time.Second), Reason: v1alpha1.AttemptDeadlineExceeded, Message: "DeadlineExceeded"},
		},
		{
			name:   "a suspended Task pauses a run that waits for its next attempt",
			run:    runs.Run{ID: "0", Attempts: []runs.Attempt{attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, failedAt)}},
			p:      policy(2, 10, 300, 2),
			paused: true,
			now:    failedAt.Add(time.Hour),
			want:   Step{Kind: Paused, Attempt: 2, At: failedAt.Add(10 * time.Second), Reason: v1alpha1.AttemptPodFailed, Message: "PodFailed"},
		},
		{
			name: "the last allowed attempt failing exhausts the retries and names its reason",
			run: runs.Run{ID: "0", Attempts: []runs.Attempt{
				attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, failedAt.Add(-time.Hour)),
				{Number: 2, Phase: runs.Failed, Reason: v1alpha1.AttemptPodFailed, Message: "exit code 3", Finished: failedAt}}},
			p:    policy(1, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: Failed, Attempt: 2, At: failedAt, Reason: v1alpha1.ReasonRetriesExhausted, Message: "all 2 attempts failed; attempt 2: PodFailed: exit code 3"},
		},
		{
			name: "a run without retries that fails says its only attempt failed",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Failed, Reason: v1alpha1.AttemptPodFailed, Message: "exit code 1", Finished: failedAt}}},
			p:    policy(0, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: Failed, Attempt: 1, At: failedAt, Reason: v1alpha1.ReasonRetriesExhausted, Message: "the only attempt failed: PodFailed: exit code 1"},
		},
		{
			name: "a not-retryable failure fails the run at once even with retries left",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Failed, Reason: v1alpha1.AttemptNotRetryable, Message: "exit code 2", Finished: failedAt}}},
			p:    policy(5, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: Failed, Attempt: 1, At: failedAt, Reason: v1alpha1.ReasonNotRetryable, Message: "NotRetryable: exit code 2"},
		},
		{
			name: "an attempt whose Job was deleted is retried at once, without backoff",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Failed, Reason: v1alpha1.AttemptJobDeleted, Message: "Job x was deleted", Finished: failedAt}}},
			p:    policy(2, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: StartAttempt, Attempt: 2, At: failedAt, Reason: v1alpha1.AttemptJobDeleted, Message: "JobDeleted: Job x was deleted"},
		},
		{
			name: "a deleted Job of the last allowed attempt fails the run",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Failed, Reason: v1alpha1.AttemptJobDeleted, Message: "Job x was deleted", Finished: failedAt}}},
			p:    policy(0, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: Failed, Attempt: 1, At: failedAt, Reason: v1alpha1.ReasonRetriesExhausted, Message: "the only attempt failed: JobDeleted: Job x was deleted"},
		},
		{
			name: "an attempt stopped for a start timeout counts as failed and is retried",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Stopped, Reason: v1alpha1.AttemptStartTimeout, Message: "pod x did not start", Finished: failedAt}}},
			p:    policy(1, 10, 300, 2),
			now:  failedAt.Add(time.Minute),
			want: Step{Kind: StartAttempt, Attempt: 2, At: failedAt.Add(10 * time.Second), Reason: v1alpha1.AttemptStartTimeout, Message: "StartTimeout: pod x did not start"},
		},
		{
			name: "an attempt stopped because a newer run replaced it stops the run",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Stopped, Reason: v1alpha1.AttemptReplaced, Finished: failedAt}}},
			p:    policy(3, 10, 300, 2),
			now:  failedAt,
			want: Step{Kind: Stopped, Attempt: 1, At: failedAt, Reason: v1alpha1.AttemptReplaced, Message: "stopped: replaced by a newer run"},
		},
		{
			name: "an attempt stopped for a cancel token cancels the run, with retries left",
			run:  runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Stopped, Reason: v1alpha1.AttemptCancelled, Message: "a new cancel token", Finished: failedAt}}},
			p:    policy(3, 10, 300, 2),
			now:  failedAt.Add(time.Hour),
			want: Step{Kind: Cancelled, Attempt: 1, At: failedAt, Reason: v1alpha1.ReasonCancelled, Message: "cancelled: a new cancel token"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Next(&c.run, c.p, c.paused, c.now)
			if got != c.want {
				t.Fatalf("Next() =\n  %+v\nwant\n  %+v", got, c.want)
			}
		})
	}
}

// A run replayed through a fake clock: fail, wait, retry, fail, give up.
func TestNextThroughAFakeClock(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	p := policy(2, 10, 300, 2)
	run := runs.Run{ID: "0"}
	fail := func() {
		run.Attempts = append(run.Attempts, attempt(int32(len(run.Attempts)+1), runs.Failed, v1alpha1.AttemptPodFailed, clock.Now()))
	}
	wantKinds := []Kind{}
	gotKinds := []Kind{}
	step := func(want Kind) {
		wantKinds = append(wantKinds, want)
		gotKinds = append(gotKinds, Next(&run, p, false, clock.Now()).Kind)
	}
	step(StartAttempt)
	fail()
	step(WaitForRetry)
	clock.Step(10 * time.Second)
	step(StartAttempt)
	fail()
	clock.Step(19 * time.Second)
	step(WaitForRetry)
	clock.Step(time.Second)
	step(StartAttempt)
	fail()
	step(Failed)
	for i := range wantKinds {
		if gotKinds[i] != wantKinds[i] {
			t.Fatalf("step %d: got %s, want %s (all: %v)", i, gotKinds[i], wantKinds[i], gotKinds)
		}
	}
}

func TestCheckStart(t *testing.T) {
	timeout := 5 * time.Minute
	created := t0
	cases := []struct {
		name    string
		pods    []PodStart
		now     time.Time
		want    StartCheck
		refused *Refusal
	}{
		{"a Job without pods is rechecked when the timeout ends", nil, t0.Add(time.Minute), StartCheck{RecheckAt: t0.Add(timeout)}, nil},
		{"a Job that still has no pod after the timeout is stuck", nil, t0.Add(timeout), StartCheck{Stuck: true, Message: "no pod was created within 5m0s; the Job's events say why (kubectl describe job): a missing ServiceAccount, an admission policy or webhook refusing pods, or no Job controller running"}, nil},
		{"running pods need no recheck", []PodStart{{Name: "a", Created: t0, Started: true}}, t0.Add(time.Hour), StartCheck{}, nil},
		{"a pending pod before its timeout is rechecked at its own deadline",
			[]PodStart{{Name: "a", Created: t0.Add(time.Minute), WaitingReason: "ContainerCreating"}}, t0.Add(5 * time.Minute),
			StartCheck{RecheckAt: t0.Add(6 * time.Minute)}, nil},
		{"a pod in image pull back-off past its timeout is stuck with that reason",
			[]PodStart{{Name: "a", Created: t0, Started: true}, {Name: "b", Created: t0, WaitingReason: "ImagePullBackOff", WaitingMessage: "Back-off pulling image \"nope\""}},
			t0.Add(timeout),
			StartCheck{Stuck: true, Message: "pod b did not start within 5m0s: ImagePullBackOff: Back-off pulling image \"nope\" (kubectl describe pod b)"}, nil},
		{"an overdue pod whose containers say nothing yet is stuck with its newest Warning event",
			[]PodStart{{Name: "a", Created: t0, Phase: "Pending", Warning: "Failed: Error: ErrImagePull"}}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "pod a did not start within 5m0s: Failed: Error: ErrImagePull (kubectl describe pod a)"}, nil},
		{"a container's waiting reason says more than an event",
			[]PodStart{{Name: "a", Created: t0, WaitingReason: "CreateContainerConfigError", WaitingMessage: "secret \"x\" not found", Warning: "Failed: Error: secret \"x\" not found"}}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "pod a did not start within 5m0s: CreateContainerConfigError: secret \"x\" not found (kubectl describe pod a)"}, nil},
		{"an overdue pod with no reason and no event is stuck with its phase",
			[]PodStart{{Name: "a", Created: t0, Phase: "Pending"}}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "pod a did not start within 5m0s: Pending (kubectl describe pod a)"}, nil},
		{"an unschedulable pod past its timeout waits for capacity and is looked at again a timeout later",
			[]PodStart{{Name: "a", Created: t0, WaitingReason: "Unschedulable", WaitingMessage: "0/1 nodes are available"}}, t0.Add(time.Hour),
			StartCheck{Waiting: true, Cause: "pod a is Unschedulable: 0/1 nodes are available", RecheckAt: t0.Add(time.Hour + 5*time.Minute)}, nil},
		{"a pod that waited for a node counts its start timeout from when it got one",
			[]PodStart{{Name: "a", Created: t0, Scheduled: t0.Add(4 * time.Minute), Phase: "Pending"}}, t0.Add(timeout),
			StartCheck{RecheckAt: t0.Add(9 * time.Minute)}, nil},
		{"a pod scheduled at once counts from its creation",
			[]PodStart{{Name: "a", Created: t0, Scheduled: t0, Phase: "Pending"}}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "pod a did not start within 5m0s: Pending (kubectl describe pod a)"}, nil},
		{"a broken pod next to an unschedulable one is stuck",
			[]PodStart{{Name: "a", Created: t0, WaitingReason: "Unschedulable"}, {Name: "b", Created: t0, WaitingReason: "ImagePullBackOff"}}, t0.Add(time.Hour),
			StartCheck{Stuck: true, Message: "pod b did not start within 5m0s: ImagePullBackOff (kubectl describe pod b)"}, nil},
		{"a Job whose pods a ResourceQuota refuses waits for capacity and is looked at again a timeout later", nil, t0.Add(time.Hour),
			StartCheck{Waiting: true, Cause: "no pod could be created: exceeded quota: q", RecheckAt: t0.Add(time.Hour + 5*time.Minute)},
			&Refusal{Capacity: true, Message: "exceeded quota: q"}},
		{"a Job whose pods are refused for a broken spec is stuck, saying why", nil, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "no pod was created within 5m0s: serviceaccount \"x\" not found (fix what refused the pod, then run the Task again)"},
			&Refusal{Message: "serviceaccount \"x\" not found"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CheckStart(created, c.pods, c.refused, timeout, c.now); got != c.want {
				t.Fatalf("CheckStart() = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestCheckRemoteStart(t *testing.T) {
	timeout := 5 * time.Minute
	for _, c := range []struct {
		name string
		pods RemotePods
		now  time.Time
		want StartCheck
	}{
		{"before the timeout the attempt is looked at again when it ends", RemotePods{Active: 1}, t0.Add(time.Minute), StartCheck{RecheckAt: t0.Add(timeout)}},
		{"past the timeout an attempt whose pods are not ready on the worker is stuck, the worker named",
			RemotePods{Cluster: "worker-1", Active: 2, Ready: 1}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "the pods did not all start within 5m0s on worker cluster worker-1 (2 active, 1 ready, as mirrored): their reasons are on the worker"}},
		{"a worker not known yet is still said to be one",
			RemotePods{}, t0.Add(timeout),
			StartCheck{Stuck: true, Message: "the pods did not all start within 5m0s on the worker cluster (0 active, 0 ready, as mirrored): their reasons are on the worker"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CheckRemoteStart(t0, c.pods, timeout, c.now); got != c.want {
				t.Fatalf("CheckRemoteStart() = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestJitterSpreadsEachDelayWithinItsBoundAndIsTheSameOnEveryPass(t *testing.T) {
	p := policy(3, 100, 1000, 2)
	if got := p.DelayOf("0", 1); got != 100*time.Second {
		t.Fatalf("without jitter the delay is %s, want 100s", got)
	}
	p.JitterPercent = 50
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		p.Seed = fmt.Sprintf("uid-%d", i)
		d := p.DelayOf("0", 1)
		if d < 50*time.Second || d > 100*time.Second || d != d.Truncate(time.Second) {
			t.Fatalf("seed %s: delay %s, want whole seconds in [50s, 100s]", p.Seed, d)
		}
		if again := p.DelayOf("0", 1); again != d {
			t.Fatalf("seed %s: %s then %s for the same attempt", p.Seed, d, again)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Errorf("200 Tasks got only %d distinct delays: the jitter does not spread them", len(seen))
	}
}

func TestAServersRetryAfterIsWaitedForUpToTheBackoffsCap(t *testing.T) {
	failedAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := func(retryAfter time.Duration) *runs.Run {
		return &runs.Run{ID: "0", Attempts: []runs.Attempt{{Number: 1, Phase: runs.Failed, Reason: v1alpha1.AttemptPodFailed,
			Finished: failedAt, RetryAfter: retryAfter, RetryAfterKnown: true}}}
	}
	p := policy(3, 10, 60, 2)
	for _, tc := range []struct {
		retryAfter, want time.Duration
	}{
		{0, 10 * time.Second},                 // none: the backoff
		{3 * time.Second, 10 * time.Second},   // shorter than the backoff: the backoff
		{30 * time.Second, 30 * time.Second},  // longer: the server's
		{120 * time.Second, 60 * time.Second}, // capped at maxSeconds
	} {
		got := Next(failed(tc.retryAfter), p, false, failedAt)
		if got.Kind != WaitForRetry || !got.At.Equal(failedAt.Add(tc.want)) {
			t.Errorf("Retry-After %s: step %+v, want the next attempt at +%s", tc.retryAfter, got, tc.want)
		}
	}
}

// A run the stored history records as finished takes no further step,
// whatever the spec says now: maxRetry raised on a Failed Task reopens
// nothing.
func TestAFinishedRunTakesNoStepWhateverTheSpecSaysNow(t *testing.T) {
	failedRun := runs.Run{ID: runs.OneShot, Attempts: []runs.Attempt{attempt(1, runs.Failed, v1alpha1.AttemptPodFailed, t0)}}
	task := func(maxRetry int32, history ...v1alpha1.RunRecord) *v1alpha1.Task {
		return &v1alpha1.Task{Spec: v1alpha1.TaskSpec{MaxRetry: maxRetry}, Status: v1alpha1.TaskStatus{History: history}}
	}
	final := v1alpha1.RunRecord{RunID: runs.OneShot, Result: v1alpha1.RunResultFailed, Reason: v1alpha1.ReasonRetriesExhausted,
		Message: "the only attempt failed", CompletionTime: &metav1.Time{Time: t0}}
	running := v1alpha1.RunRecord{RunID: runs.OneShot, Result: v1alpha1.RunResultRunning}
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		task *v1alpha1.Task
		want Step
	}{{
		name: "maxRetry raised after the history recorded the failure: still failed",
		task: task(2, final),
		want: Step{Kind: Failed, Attempt: 1, At: t0, Reason: v1alpha1.ReasonRetriesExhausted, Message: "the only attempt failed"},
	}, {
		name: "maxRetry raised while the run is still retrying: the next attempt starts",
		task: task(2, running),
		want: Step{Kind: StartAttempt, Attempt: 2, At: t0.Add(10 * time.Second), Reason: v1alpha1.AttemptPodFailed, Message: FailureText(&failedRun.Attempts[0])},
	}, {
		name: "no history yet (a lost status write): the attempts decide",
		task: task(0),
		want: Step{Kind: Failed, Attempt: 1, At: t0, Reason: v1alpha1.ReasonRetriesExhausted, Message: exhausted(1, FailureText(&failedRun.Attempts[0]))},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Steps(tc.task, []runs.Run{failedRun}, now)[runs.OneShot]
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}
