// Package guards holds what both controllers (the Task controller and the
// TaskQueue controller) check before and after they act, so neither
// borrows it from the other:
//
//   - the leader lease: a replica that was paused (or cut off) past its
//     lease acts on a stale cache until client-go notices and the process
//     exits; it must not write meanwhile (Held, ErrLeaseLapsed, StandDown);
//   - an optimistic-lock conflict, which is routine (the cache had not
//     seen the newest object yet): a quiet requeue, not an error
//     (OnConflict);
//   - both at once, at the end of a pass whose stages just return their
//     errors (Settle);
//   - a refusal that may pass (an outage: 5xx, 429, a timeout, a webhook
//     restarting), which waits and is tried again, never final (MayPass).
package guards

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Lease reports whether this replica may act as the leader right now.
type Lease interface {
	Held() bool
}

// Held reports whether a replica with lease l (nil: no leader election)
// may write as the leader.
func Held(l Lease) bool { return l == nil || l.Held() }

// LeaseRecheck is how soon a pass that found the lease lapsed looks again:
// by then the replica has either renewed it or exited.
const LeaseRecheck = time.Second

// ErrLeaseLapsed stops a pass that found the lease lapsed before a write.
var ErrLeaseLapsed = errors.New("the leader lease lapsed; not acting on a possibly stale cache")

// StandDown ends a pass that found the lease lapsed: nothing written, a
// look again once the replica has renewed its lease or exited.
func StandDown(ctx context.Context) (reconcile.Result, error) {
	log.FromContext(ctx).V(1).Info(ErrLeaseLapsed.Error())
	return reconcile.Result{RequeueAfter: LeaseRecheck}, nil
}

// Settle ends a pass as its error says: a lapsed lease (ErrLeaseLapsed,
// wrapped or not) stands down (StandDown), an optimistic-lock conflict is
// a quiet requeue (OnConflict), anything else is res and err as they are.
// A controller's Reconcile calls it once, so its stages just return their
// errors.
func Settle(ctx context.Context, res reconcile.Result, err error) (reconcile.Result, error) {
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrLeaseLapsed):
		return StandDown(ctx)
	case apierrors.IsConflict(err):
		return OnConflict(ctx, err)
	}
	return res, err
}

// ConflictRetry is how soon a pass that lost an optimistic-lock race runs
// again. The race is routine, so it is neither an error nor left to the
// error backoff; and since the operator's own status writes trigger no
// pass, it must requeue itself.
const ConflictRetry = 250 * time.Millisecond

// OnConflict turns an optimistic-lock conflict into a quiet requeue and
// passes any other error on.
func OnConflict(ctx context.Context, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("the object changed under this pass; running it again", "error", err.Error())
		return reconcile.Result{RequeueAfter: ConflictRetry}, nil
	}
	return reconcile.Result{}, err
}

// MayPass reports an API error that may not repeat: a write tried again
// after it can succeed. A webhook the API server could not call (its
// pods restarting, with failurePolicy Fail) is an internal error (500).
func MayPass(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || errors.Is(err, context.DeadlineExceeded)
}
