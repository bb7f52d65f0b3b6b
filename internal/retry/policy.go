// Package retry is the retry state machine of one run: pure functions of the
// run's observed attempts, the Task's retry policy and the time, returning the
// next step. It performs no I/O and reads no clock.
package retry

import (
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
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

// StartTimeout is spec.startTimeoutSeconds as a duration, with its default.
func StartTimeout(spec *v1alpha1.TaskSpec) time.Duration {
	if spec.StartTimeoutSeconds == nil {
		return DefaultStartTimeoutSeconds * time.Second
	}
	return time.Duration(*spec.StartTimeoutSeconds) * time.Second
}
