// Package multikueue tests Tasks whose attempts Kueue's MultiKueue
// dispatches to worker clusters: `make test-multikueue`. Three local
// control planes run side by side (test/localcluster, each with a kwok
// node; the manager and worker-1 with a real node too): a manager, where
// the operator and a Kueue with MultiKueue run, and two workers, worker-1
// and worker-2, each with its own Kueue. The manager's Kueue reaches the
// workers through kubeconfig Secrets in kueue-system (the workers' admin
// kubeconfigs, loopback addresses); the operator reads worker-1's Task
// pods with a read-only kubeconfig (output_test.go). docs/multicluster.md
// describes the topology and what a user sees.
//
// What lives where: main_test.go (the topology), setup_test.go (each
// test's queues and Tasks), multikueue_test.go (dispatch, retries, start,
// cancel, capacity, a lost worker), stops_test.go (every stop, and
// notifications), output_test.go (output from the workers),
// realnode_test.go (a real container on a worker).
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
