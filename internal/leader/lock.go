// Package leader tells the reconciler whether this replica may still act as
// the leader, more strictly than client-go's leader elector does.
//
// client-go notices a lost lease only when its renew loop gives up: up to
// RenewDeadline after the last renew attempt began. A replica that was
// paused (SIGSTOP, a frozen VM, a long GC or swap stall) past its lease
// wakes up believing it leads and acts on its stale cache for those seconds
// while another replica already leads. Lock closes that window: it wraps the
// resourcelock.Interface the elector uses, remembers when the last renewal
// that succeeded was sent, and Held reports true only for a bounded time
// after that.
//
// Why this is safe. A standby takes the lease over only once LeaseDuration
// has passed, on its own clock, since it last saw the lease record change
// (client-go's isLeaseValid: observedTime + LeaseDurationSeconds), and its
// takeover is an Update with the resourceVersion it read, so it succeeds
// only if no renewal of this replica was applied in between. So the record
// it read is that of this replica's last applied renewal, sent at some time
// S before the API server applied it, and the standby first saw it after
// that: it cannot take over before S + LeaseDuration, and no later renewal
// of this replica succeeds. Lock takes the time S before sending each
// request and keeps it only if the request succeeded, and Held is true only
// while now < S + validity. With validity <= RenewDeadline < LeaseDuration,
// a replica whose Held returns true is at least LeaseDuration - validity
// (5 s with the defaults) before any possible takeover, however long it was
// paused: a paused replica's S does not move, so after the pause Held is
// false until a renewal succeeds, which it only does if nobody took over.
// Both clocks are monotonic (Go's time.Now carries a monotonic reading), so
// wall-clock steps do not matter; only the clocks' rates do: one replica's
// clock would have to run 1.5 times as fast as the other's (15 s against
// 10 s) to break the bound.
//
// What it does not cover: Held is a check, not a fence. A write that passed
// the check and is then delayed by more than that margin (the process
// paused between the check and the request, or the request stuck on the
// network) still reaches the API server after a takeover. The reconciler's
// writes are made harmless in other ways (deterministic Job names,
// optimistic locking of status patches); Held keeps a resumed ex-leader from
// *starting* new work from its stale cache.
package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// The leader election timing. These are controller-runtime's defaults; the
// manager is given them explicitly, and Lock's validity is RenewDeadline,
// so the two cannot drift apart.
const (
	// LeaseDuration is how long a standby waits, after it last saw the
	// lease record change, before it takes over.
	LeaseDuration = 15 * time.Second
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// client-go gives up the lease (and the manager exits). It is also how
	// long Held stays true after a renewal was sent.
	RenewDeadline = 10 * time.Second
	// RetryPeriod is how often the elector tries to acquire or renew.
	RetryPeriod = 2 * time.Second
)

// Lock is a resourcelock.Interface that also tells whether this replica
// still holds the lease (Held). It passes every call on to the wrapped lock.
type Lock struct {
	inner    resourcelock.Interface
	clock    clock.PassiveClock
	validity time.Duration

	mu sync.Mutex
	// renewSent is when the last successful Create/Update that names this
	// replica as the holder was sent; zero: none, or given up since.
	renewSent time.Time
	// releaseSent is when this replica last sent a record naming another
	// holder (a release); a renewal sent before it no longer counts.
	releaseSent time.Time
}

var _ resourcelock.Interface = (*Lock)(nil)

// NewLock wraps inner. validity is how long after sending a successful
// renewal Held stays true; it must be positive and at most the elector's
// RenewDeadline (which is below its LeaseDuration): see the package
// documentation for why.
func NewLock(inner resourcelock.Interface, validity time.Duration, c clock.PassiveClock) (*Lock, error) {
	if inner == nil {
		return nil, fmt.Errorf("leader: no lock to wrap")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("leader: lease validity must be positive, not %s", validity)
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return &Lock{inner: inner, clock: c, validity: validity}, nil
}

// Held reports whether this replica may act as the leader now: a renewal
// (or the acquisition) of the lease that succeeded was sent less than the
// validity ago. Before the first one it is false.
func (l *Lock) Held() bool {
	l.mu.Lock()
	sent := l.renewSent
	l.mu.Unlock()
	return !sent.IsZero() && l.clock.Now().Before(sent.Add(l.validity))
}

// Get reads the lease record. Reading proves nothing about holding it, so
// it does not extend Held.
func (l *Lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return l.inner.Get(ctx)
}

// Create creates the lease record (the first acquisition).
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.inner.Create)
}

// Update writes the lease record: a renewal, an acquisition, or a release.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.inner.Update)
}

func (l *Lock) write(ctx context.Context, ler resourcelock.LeaderElectionRecord, do func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	sent := l.clock.Now()
	if ler.HolderIdentity != l.inner.Identity() {
		// A release (client-go writes an empty holder): another replica
		// may take over as soon as the API server applies it, so this one
		// stops holding before sending it, whether it succeeds or not.
		l.mu.Lock()
		l.renewSent, l.releaseSent = time.Time{}, sent
		l.mu.Unlock()
		return do(ctx, ler)
	}
	if err := do(ctx, ler); err != nil {
		// A failed (or timed-out) write may still have been applied; not
		// counting it only makes Held end sooner, never later.
		return err
	}
	l.mu.Lock()
	if sent.After(l.renewSent) && !sent.Before(l.releaseSent) {
		l.renewSent = sent
	}
	l.mu.Unlock()
	return nil
}

// RecordEvent passes the elector's events on while the lease is held:
// "became leader" (recorded right after the acquisition), and "stopped
// leading" on a clean shutdown (recorded before the release). A replica
// whose lease lapsed writes nothing, so it drops its "stopped leading" of
// a lost lease: its log says "leader election lost", and the new leader's
// "became leader" event tells the story.
func (l *Lock) RecordEvent(s string) {
	if l.Held() {
		l.inner.RecordEvent(s)
	}
}

// Identity is this replica's identity in the election.
func (l *Lock) Identity() string { return l.inner.Identity() }

// Describe names the lock, for logs.
func (l *Lock) Describe() string { return l.inner.Describe() }
