package testutil

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Eventually polls cond every interval until it reports done, and fails
// the test with what cond last said when timeout, scaled for the machine
// (Timeout), has passed. Each try gets a context of its own (10 s). It
// returns how long it took. Every suite's waiting goes through it (or
// Promptly): a condition with a deadline, never a sleep standing in for
// one.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	return poll(t, Timeout(timeout), interval, what, cond)
}

// Promptly is Eventually for a latency promise: bound is not scaled
// (AtOnce says why), and the failure says which promise was broken.
func Promptly(t testing.TB, bound, interval time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	return poll(t, bound, interval, what+" (a promise: acted on at once, not on a later recheck)", cond)
}

func poll(t testing.TB, timeout, interval time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done, detail := cond(ctx)
		cancel()
		if done {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(interval) // the poll interval, not a stand-in for the condition
	}
}

var namespaces atomic.Int32

// NewNamespace creates a namespace of the test's own, named prefix plus a
// number unique in this process and run.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d-%d", prefix, time.Now().Unix()%100000, namespaces.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}
