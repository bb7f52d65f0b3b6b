// Package notify is spec.notify: which run outcomes are told to whom
// (outcome.go, pure, for the operator), the outcome document a webhook
// receives (document.go), and the sender the notification Job runs as
// `/task-runner notify` (send.go), which reads its targets from the
// environment the operator's Job gives it (env.go). The operator never
// reads a Secret: a Secret-backed URL or header reaches only the sender,
// through the kubelet, and the sender masks it in everything it prints.
package notify
