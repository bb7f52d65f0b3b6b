package fastpath

import "time"

// What the fast path's memories (createdJobs, ownWrites) keep: a value and
// when it was remembered, good for a TTL.

// stamped is a remembered value and when it was remembered.
type stamped[V any] struct {
	v  V
	at time.Time
}

// stale reports whether the value is older than ttl, or from a clock that
// has gone backwards since: either way it may be wrong now.
func (s stamped[V]) stale(now time.Time, ttl time.Duration) bool {
	return now.Sub(s.at) > ttl || now.Before(s.at)
}

// remember puts v, stamped now, in *m under k (making the map if it is
// nil).
func remember[K comparable, V any](m *map[K]stamped[V], k K, v V, now time.Time) {
	if *m == nil {
		*m = map[K]stamped[V]{}
	}
	(*m)[k] = stamped[V]{v: v, at: now}
}

// forget deletes k from *m, and drops the map once it is empty: a Go map
// keeps the room of its largest size, and these fill up in a burst (one
// entry per Task in flight) and empty after it.
func forget[K comparable, V any](m *map[K]stamped[V], k K) {
	delete(*m, k)
	if len(*m) == 0 {
		*m = nil
	}
}
