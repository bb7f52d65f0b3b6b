// Package rulecost measures what the Task CRD's validation rules (CEL)
// cost the API server on each write of a Task, its status writes
// included: the API server runs every rule of a CRD on every write of an
// object, and the operator writes a Task's status about three times per
// run. It is a benchmark, not a test (`make bench-rules`): it starts a
// kube-apiserver with the CRD as shipped and one with the same CRD
// without its rules, in turns, sends each the same creates and status
// patches, and prints the API server's CPU per create and per patch for
// both and their ratios.
package rulecost
