package testutil

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// How long a test waits for something the operator does asynchronously is
// decided here, once, for every suite.
//
// A deadline in a test is a guess about the machine: a pass that takes
// 50 ms on an idle laptop takes seconds on a CI machine whose two cores
// also run the API server, etcd, the other test packages and, in
// `make test-stress`, two busy loops. Each suite writes the deadline it
// would give an idle machine and waits through Timeout (Eventually does
// it for them), which multiplies it by one factor for the whole run.
//
// A latency promise is different: "the admitted attempt's Job is created
// at once" says the operator acts on the event itself and not on a later
// recheck. Its bound (AtOnce) is a promise and is not scaled: made longer,
// it would also pass an operator that waits for a recheck.

// TimeoutScaleEnv names the environment variable that sets the factor
// (a positive number; 1 keeps the suites' own figures).
const TimeoutScaleEnv = "TEST_TIMEOUT_SCALE"

// DefaultTimeoutScale is the factor when TimeoutScaleEnv is unset: the
// envtest suites' waits (20 s) become a minute, which the suites need with
// both cores busy (`make test-stress`, docs/development.md).
const DefaultTimeoutScale = 3

// AtOnce bounds what the operator promises to do on the event itself: a
// Task's pass after an admission, a deletion, a finished Job. It is below
// the shortest periodic recheck the operator has (a refused Job is tried
// again after a minute), so an operator that only acts on a recheck fails
// it, and far above a pass on a busy machine (tens of milliseconds to a
// few seconds), so a slow machine does not.
const AtOnce = 30 * time.Second

var scale = sync.OnceValue(func() float64 {
	v := os.Getenv(TimeoutScaleEnv)
	if v == "" {
		return DefaultTimeoutScale
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		panic(fmt.Sprintf("%s=%q: want a positive number", TimeoutScaleEnv, v))
	}
	return f
})

// TimeoutScale is the factor Timeout applies in this run.
func TimeoutScale() float64 { return scale() }

// Timeout is how long to wait for something a suite would give d on an
// idle machine: d times the run's factor.
func Timeout(d time.Duration) time.Duration {
	return time.Duration(float64(d) * scale())
}
