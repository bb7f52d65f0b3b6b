// Package harness is what the suites that run the operator as a process
// share: test/e2e (build tag e2e), test/reliability (build tag
// reliability), the benchmark (test/bench) and the manager smoke test
// (test/manifests).
//
//   - cluster.go: the project's local control plane (test/localcluster),
//     started, with the Task CRD and an admin client; building commands;
//   - operator.go: the manager as a child process (started, killed,
//     stopped, paused), its metrics, probes and profiles;
//   - workspace.go: a suite's folders and settings (PREFIX_CLUSTER_DIR,
//     PREFIX_KEEP_CLUSTER, PREFIX_MANAGER_BINARY) and per-test namespaces;
//   - observe.go: the observers that check the operator's invariants while
//     it works: a Job recorder (at most one Job per Task, run and attempt,
//     including Jobs that were created and deleted in between) and a status
//     monitor (attempts and history never move backwards);
//   - namespace.go: how far a namespace deletion got;
//   - metrics.go: Prometheus scrapes (the API server's own too), parsed
//     with expfmt;
//   - apiwrites.go: which API server requests are writes, and the
//     resource keys the write tables count them by;
//   - stats.go: the median the benchmarks read their repeats by;
//   - tasks.go: reading Tasks, Jobs and pods; the kwok simulation
//     annotations.
//
// Tasks are built with internal/testutil's builders. It is a plain package
// (no build tag) so `go vet ./...` checks it; nothing here runs unless a
// suite calls it.
package harness
