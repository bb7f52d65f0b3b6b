// Package reliability holds the reliability scenarios of task-operator: the
// operator runs as its own process (the binary of ./cmd/manager, as the
// ServiceAccount of config/, with only the generated RBAC) against the
// project's local control plane (hack/local-cluster.sh), and is killed,
// paused, throttled, starved of its API server and of its leader lease
// while Tasks run; the tests check the contract's invariants throughout:
// at most one Job per (Task, run, attempt), every one-shot Task ends
// Succeeded or Failed with attempts <= maxRetry + 1, status agrees with the
// Jobs and never moves backwards, no Job for a Task or namespace being
// deleted, nothing lost. See docs/reliability.md for the scenarios and the
// figures they print.
//
// The tests carry the build tag reliability, so `go test ./...` skips them:
//
//	go test -tags reliability ./test/reliability/ -count=1 -timeout 90m -v
//	RELIABILITY_FAST=1 go test -tags reliability ./test/reliability/ -count=1 -timeout 30m -v
//
// (or `make test-reliability` / `make test-reliability-fast`). TestMain
// brings a fresh cluster up in tmp/reliability-cluster
// (RELIABILITY_CLUSTER_DIR), builds the manager (or uses
// RELIABILITY_MANAGER_BINARY), and brings everything down at the end;
// RELIABILITY_KEEP_CLUSTER=1 leaves the cluster up, and
// RELIABILITY_REUSE_CLUSTER=1 reuses a running one. Operator logs go to
// DIR/operators/. RELIABILITY_SEED fixes the random kill moments.
package reliability
