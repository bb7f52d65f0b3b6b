package main

import (
	"context"
	"time"
)

// A run read against another (the operator against its oracle) starts on
// a quiet API server: the controllers' work on what came before (the Job
// controller's events and pod deletes for Jobs just deleted, the garbage
// collector's checks of their owners) otherwise spills into the first
// seconds of the run. In the pre-created burst of 2026-12-06 12:00 it did
// into the operator's (the oracle's Jobs, deleted while the Job controller
// still made their pods: 175 of its events and 71 owner reads in the
// operator's first 7 s) and not into the oracle's runs.

const (
	// quietFor is how long the API server must take no write (node
	// heartbeats apart) for quiet.
	quietFor = 2 * time.Second
	// quietTimeout bounds the wait: a cluster that never quiets down is
	// measured as it is, and the log says so.
	quietTimeout = 2 * time.Minute
	// quietPoll is how often the API server's /metrics is read meanwhile.
	quietPoll = 500 * time.Millisecond
)

// heartbeats are the writes a quiet cluster still takes: leases (leader
// election, the node's) and the node's status.
var heartbeats = map[string]bool{"leases": true, "nodes/status": true}

// waitQuiet waits until the API server has counted no write but
// heartbeats for quietFor, and logs how long that took before what.
func waitQuiet(ctx context.Context, o *options, cl *cluster, what string) error {
	start := time.Now()
	last, since := -1.0, start
	err := poll(ctx, quietTimeout, quietPoll, func() (bool, error) {
		m, err := cl.apiMetrics(ctx)
		if err != nil {
			return false, err
		}
		total := 0.0
		for k, v := range apiWrites(m) {
			if !heartbeats[k] {
				total += v
			}
		}
		if now := time.Now(); total != last {
			last, since = total, now
			return false, nil
		}
		return time.Since(since) >= quietFor, nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		o.logf("WARNING: the API server still took writes %s after the last run; %s starts anyway (%v)", quietTimeout, what, err)
		return nil
	}
	o.logf("the API server quiet (no write for %s) after %.1f s: %s starts", quietFor, time.Since(start).Seconds(), what)
	return nil
}
