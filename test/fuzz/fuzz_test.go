// Package fuzz_test sends hostile and malformed Tasks through a real API
// server (envtest, with the generated CRD and its CEL rules), the operator's
// schedule parser, the Job API and the hand-driven reconciler, and checks
// the contract (docs/api.md): every invalid spec is
// refused with a field path or reported as InvalidSpec / InvalidSchedule,
// no valid spec is refused, and nothing panics. See README.md.
package fuzz_test

import (
	"context"
	"runtime/debug"
	"testing"
	"time"

	"github.com/taskops/task-operator/internal/testutil"
)

// FuzzTaskAdmission: server-side dry-run of the Task; for an accepted one,
// the schedule as the reconciler parses it, the Job as the reconciler
// builds it (dry-run too), and an http Task's request as the runner reads
// it. The checks are in admit and compare.
func FuzzTaskAdmission(f *testing.F) {
	f.Fuzz(func(t *testing.T,
		name, typ, shell, url, schedule, timeZone, concurrency, image, serviceAccount string,
		method, body, headerName, headerValue, secretName, secretKey string,
		envName, envValue, fieldPath, labelKey, labelValue, annotationKey string,
		annotationValue, resName, request, limit, extra string,
		replicas, maxRetry, backoffInitial, backoffMax, backoffFactor int64,
		activeDeadline, startTimeout, startingDeadline, ttl int64,
		historyOK, historyFailed, successCode, timeoutSeconds int64,
		count, bigField, bigLen int64, mask uint64,
	) {
		in := input{
			name, typ, shell, url, schedule, timeZone, concurrency, image, serviceAccount,
			method, body, headerName, headerValue, secretName, secretKey,
			envName, envValue, fieldPath, labelKey, labelValue, annotationKey,
			annotationValue, resName, request, limit, extra,
			replicas, maxRetry, backoffInitial, backoffMax, backoffFactor,
			activeDeadline, startTimeout, startingDeadline, ttl,
			historyOK, historyFailed, successCode, timeoutSeconds,
			count, bigField, bigLen, mask,
		}.normalize()
		hs := need(t)
		defer noPanic(t)
		ctx, cancel := context.WithTimeout(hs.ctx, testutil.Timeout(30*time.Second))
		defer cancel()
		c := &check{t: t, in: in}
		defer c.timed(time.Now())
		admit(ctx, c, hs, admissionNS, in.Name)
	})
}

// FuzzReconcile: accepted specs are created for real and driven through a
// few hand-driven reconcile passes while the test plays the Job controller
// and moves a fake clock; see reconcileInput.
func FuzzReconcile(f *testing.F) {
	f.Fuzz(func(t *testing.T,
		name, typ, shell, url, schedule, timeZone, concurrency, image, serviceAccount string,
		method, body, headerName, headerValue, secretName, secretKey string,
		envName, envValue, fieldPath, labelKey, labelValue, annotationKey string,
		annotationValue, resName, request, limit, extra string,
		replicas, maxRetry, backoffInitial, backoffMax, backoffFactor int64,
		activeDeadline, startTimeout, startingDeadline, ttl int64,
		historyOK, historyFailed, successCode, timeoutSeconds int64,
		count, bigField, bigLen int64, mask uint64,
		script uint64, podMessage string, exitCode int64,
	) {
		in := input{
			name, typ, shell, url, schedule, timeZone, concurrency, image, serviceAccount,
			method, body, headerName, headerValue, secretName, secretKey,
			envName, envValue, fieldPath, labelKey, labelValue, annotationKey,
			annotationValue, resName, request, limit, extra,
			replicas, maxRetry, backoffInitial, backoffMax, backoffFactor,
			activeDeadline, startTimeout, startingDeadline, ttl,
			historyOK, historyFailed, successCode, timeoutSeconds,
			count, bigField, bigLen, mask,
		}.normalize()
		hs := need(t)
		defer noPanic(t)
		ctx, cancel := context.WithTimeout(hs.ctx, testutil.Timeout(60*time.Second))
		defer cancel()
		c := &check{t: t, in: in}
		defer c.timed(time.Now())
		reconcileInput(ctx, c, hs, play{script: script, message: podMessage, exitCode: exitCode})
	})
}

// noPanic turns a panic in the code under test into a test failure with
// its stack, so the fuzzing worker survives and records the input.
func noPanic(t *testing.T) {
	if r := recover(); r != nil {
		t.Fatalf("panic: %v\n%s", r, debug.Stack())
	}
}
