// Package retry is the retry state machine of one run: pure functions of the
// run's observed attempts, the Task's retry policy and the time, returning the
// next step. It performs no I/O and reads no clock.
package retry

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// Defaults of spec.backoff and spec.startTimeoutSeconds, applied when the
// API server has not defaulted them (an object stored before a default
// existed, or a unit test).
const (
	DefaultInitialSeconds      = 10
	DefaultMaxSeconds          = 300
	DefaultFactor              = 2
	DefaultStartTimeoutSeconds = 300
)

// Policy is how stubbornly a run is retried.
type Policy struct {
	// MaxRetry is the number of retries after a failed attempt.
	MaxRetry int32
	// InitialSeconds, MaxSeconds and Factor define the backoff:
	// min(initial * factor^(n-1), max) seconds before attempt n+1.
	InitialSeconds int64
	MaxSeconds     int64
	Factor         int64
	// JitterPercent spreads each delay over [delay x (1 - p/100), delay].
	JitterPercent int64
	// Seed makes the jitter of one Task's attempts its own (the Task's
	// UID): the spread is a hash of the seed, the run and the attempt, so
	// every pass computes the same delay for the same attempt.
	Seed string
}

// PolicyFor reads the retry policy of a Task spec, with defaults.
func PolicyFor(spec *v1alpha1.TaskSpec) Policy {
	p := Policy{
		MaxRetry:       spec.MaxRetry,
		InitialSeconds: DefaultInitialSeconds,
		MaxSeconds:     DefaultMaxSeconds,
		Factor:         DefaultFactor,
	}
	if b := spec.Backoff; b != nil {
		p.InitialSeconds, p.MaxSeconds, p.Factor = int64(b.InitialSeconds), int64(b.MaxSeconds), int64(b.Factor)
		p.JitterPercent = min(max(int64(b.JitterPercent), 0), 100)
		if p.Factor < 1 {
			p.Factor = 1
		}
		if p.MaxSeconds < p.InitialSeconds {
			p.MaxSeconds = p.InitialSeconds
		}
	}
	return p
}

// MaxAttempts is the most attempts one run may have.
func (p Policy) MaxAttempts() int32 { return p.MaxRetry + 1 }

// Delay is the wait between the failure of attempt n and the start of
// attempt n+1: min(initial * factor^(n-1), max) seconds. It multiplies step
// by step and stops at the cap, so no power is ever computed that could
// overflow, whatever n and factor are.
func (p Policy) Delay(failedAttempt int32) time.Duration {
	d := p.InitialSeconds
	for i := int32(1); i < failedAttempt && d < p.MaxSeconds; i++ {
		if d > p.MaxSeconds/p.Factor {
			d = p.MaxSeconds
			break
		}
		d *= p.Factor
	}
	if d > p.MaxSeconds {
		d = p.MaxSeconds
	}
	return time.Duration(d) * time.Second
}

// DelayOf is the wait before the attempt after failedAttempt of run runID:
// Delay, less a jitter of up to JitterPercent of it, the same for the same
// seed, run and attempt. Whole seconds, like every time in the status.
func (p Policy) DelayOf(runID string, failedAttempt int32) time.Duration {
	d := p.Delay(failedAttempt)
	if p.JitterPercent <= 0 || d <= 0 {
		return d
	}
	sum := sha256.Sum256([]byte(p.Seed + "/" + runID + "/" + strconv.Itoa(int(failedAttempt))))
	u := float64(binary.BigEndian.Uint64(sum[:8])) / float64(math.MaxUint64) // in [0, 1]
	cut := time.Duration(float64(d) * float64(p.JitterPercent) / 100 * u)
	return (d - cut).Truncate(time.Second)
}

// StartTimeout is spec.startTimeoutSeconds as a duration, with its default.
func StartTimeout(spec *v1alpha1.TaskSpec) time.Duration {
	if spec.StartTimeoutSeconds == nil {
		return DefaultStartTimeoutSeconds * time.Second
	}
	return time.Duration(*spec.StartTimeoutSeconds) * time.Second
}

// Deadline is when an active attempt's spec.activeDeadlineSeconds ends,
// counted, as the Job controller counts it, from its Job's start: its
// creation, or its resumption from suspension. ok is false without a
// deadline and while no clock runs: a Job held suspended, or one Kueue
// admitted whose start the Job controller has not recorded yet (kueue:
// the Task's Jobs are Kueue's to admit). The operator stops the attempt at
// the deadline itself (DeadlineExceeded), after keeping what its pods
// printed: were the Job controller to kill the pods first, a script that
// ends at SIGTERM leaves nothing to read.
func Deadline(spec *v1alpha1.TaskSpec, a *runs.Attempt, kueue bool) (at time.Time, ok bool) {
	if spec.ActiveDeadlineSeconds == nil || a.Held || (kueue && a.Resumed.IsZero()) {
		return time.Time{}, false
	}
	return a.StartBase().Add(time.Duration(*spec.ActiveDeadlineSeconds) * time.Second), true
}

// FirstStartCheck is how long after an attempt's start its pods are first
// looked at: the start timeout, or the capacity timeout when that is
// shorter, so a capacity timeout fires at its own time and not at the next
// start check.
func FirstStartCheck(spec *v1alpha1.TaskSpec) time.Duration {
	first := StartTimeout(spec)
	if ct := CapacityTimeout(spec); ct > 0 && ct < first {
		first = ct
	}
	return first
}

// CapacityTimeout is spec.capacityTimeoutSeconds as a duration; zero: wait
// as long as Jobs do.
func CapacityTimeout(spec *v1alpha1.TaskSpec) time.Duration {
	if spec.CapacityTimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*spec.CapacityTimeoutSeconds) * time.Second
}
