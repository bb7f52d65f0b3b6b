// Package multikueue tests Tasks whose attempts Kueue's MultiKueue
// dispatches to worker clusters: `make test-multikueue`. Three local
// control planes run side by side (test/localcluster, each with a kwok
// node): a manager, where the operator and a Kueue with MultiKueue run,
// and two workers, worker-1 and worker-2, each with its own Kueue. The
// manager reaches the workers through kubeconfig Secrets in kueue-system
// (the workers' admin kubeconfigs, loopback addresses). docs/multicluster.md
// describes the topology and what a user sees.
//
// Every test makes its own namespace and queues in all three clusters
// (ClusterQueues select the test's namespace), so tests run in parallel;
// the one that stops a worker's API server runs alone, first.
//
// Shortcut, as in test/kueue: Kueue v0.17.0 with its internal certificate
// management off reads its metrics certificate from the fixed path
// /etc/kueue/metrics/certs; the suite creates that folder for the run and
// removes what it created.
package multikueue
