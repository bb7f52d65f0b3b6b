// Package jobs names and builds the batch/v1 Job of one attempt of a Task.
// The run ids that go into the names are internal/runs' (ids.go).
//
// Everything here is pure: the same Task, run id and attempt always give the
// same Job name and the same Job, so a restarted operator (or a new leader)
// finds the Jobs it made instead of creating a second one for an attempt.
package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/taskops/task-operator/api/v1alpha1"
)

const (
	// maxNameLength bounds a Job name. The Job controller names an Indexed
	// Job's pods (and their hostnames, which are DNS-1123 labels of at most
	// 63 characters) `<job name>-<index>`; with replicas <= 100 the index
	// suffix is at most 3 characters ("-99"), so 60 keeps hostnames valid.
	maxNameLength = 60

	// uidHashLength is how many hex digits of sha256(task UID) go into a
	// Job name: enough that a deleted and re-created Task (same name, new
	// UID) practically never meets its predecessor's Jobs, short enough to
	// leave room for the Task name.
	uidHashLength = 5
)

// Name is the deterministic name of the Job of one attempt:
//
//		<task-name-part>-<uidhash>-<runID>-<attempt>
//
//	  - task-name-part: the Task name, so `kubectl get jobs` shows whose Job it
//	    is; the only part truncated to keep the name within 60 characters
//	    (trailing '-' trimmed so the name stays a valid DNS-1123 label).
//	  - uidhash: the first 5 hex digits of sha256(task UID), always present, so
//	    a deleted and re-created Task never adopts or collides with its
//	    predecessor's Jobs (which may still be terminating).
//	  - runID: which run ("0", "s<unix>", "m<hash>": runs/ids.go) the Job belongs to.
//	  - attempt: the 1-based attempt within the run; one Job per attempt.
//
// The result is a valid DNS-1123 label (and therefore subdomain) of at most
// 60 characters for every Task name admission accepts.
func Name(task *v1alpha1.Task, runID string, attempt int32) string {
	suffix := "-" + uidHash(task) + "-" + runID + "-" + strconv.FormatInt(int64(attempt), 10)

	prefix := labelSafe(task.Name)
	if budget := maxNameLength - len(suffix); len(prefix) > budget {
		prefix = prefix[:max(budget, 0)]
	}
	// Truncation may end the prefix on '-', which would give "--" (valid,
	// but ugly) or, for an empty prefix, a leading '-' (invalid).
	prefix = strings.TrimRight(prefix, "-")
	if prefix == "" {
		// Only reachable for an empty or all-symbol Task name: the hash is
		// alphanumeric, so the name still starts with a letter or digit.
		return suffix[1:]
	}
	return prefix + suffix
}

// uidHash is the short hash of the Task's UID used in Job names.
func uidHash(task *v1alpha1.Task) string {
	sum := sha256.Sum256([]byte(task.UID))
	return hex.EncodeToString(sum[:])[:uidHashLength]
}

// labelSafe maps a Task name to DNS-1123 label characters. Admission already
// refuses names that are not DNS-1123 labels, so this is the identity for
// every real Task; it only keeps a Task that bypassed validation (e.g. a
// name with dots) from producing an invalid Job name.
func labelSafe(name string) string {
	name = strings.ToLower(name)
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
