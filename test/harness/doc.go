// Package harness is what the end-to-end suites (test/e2e, build tag e2e,
// and test/reliability, build tag reliability) share: the project's local
// control plane (hack/local-cluster.sh), the manager run as a child process
// (started, killed, stopped, paused), Task builders, and the observers that
// check the operator's invariants while it works: a Job recorder (at most
// one Job per Task, run and attempt, including Jobs that were created and
// deleted in between) and a status monitor (attempts and history never move
// backwards).
//
// It is a plain package (no build tag) so `go vet ./...` checks it; nothing
// here runs unless a suite calls it.
package harness
