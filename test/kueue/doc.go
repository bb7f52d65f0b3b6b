// Package kueue tests Tasks queued by a real Kueue controller (v0.17.0,
// built by hack/kueue.sh from the Go module proxy) on the local cluster:
// `make test-kueue`. Kueue runs as a local process next to the operator;
// the cluster has a kwok node, whose pods honour the Jobs' CPU requests as
// Kueue counts them.
//
// Shortcut: Kueue v0.17.0 with its internal certificate management off
// reads its metrics certificate from the fixed path
// /etc/kueue/metrics/certs; the suite creates that folder for the run and
// removes what it created.
package kueue
