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
	"slices"
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

	// uidHashLength is how many hex digits of sha256(task UID) go into the
	// Job name of a Task whose whole name fits: enough that a deleted and
	// re-created Task (same name, new UID) practically never meets its
	// predecessor's Jobs. Two live Tasks of a namespace cannot share such
	// a name: their names differ, and the name is in it whole.
	uidHashLength = 5

	// cutHashLength is how many hex digits of sha256(task name, UID) go into
	// the Job name of a Task whose name is cut: Tasks whose names share the
	// first characters (generated CI names) differ only by it. 48 bits: for
	// 100,000 such Tasks in one namespace the chance that any two collide
	// is about 2 in 100,000 (n^2 / 2^49); with 5 digits (20 bits) it was
	// 11% at 500 Tasks.
	cutHashLength = 12
)

// Name is the deterministic name of the Job of one attempt:
//
//		<task-name-part>-<hash>-<runID>-<attempt>
//
//	  - task-name-part: the Task name, so `kubectl get jobs` shows whose Job it
//	    is; the only part truncated to keep the name within 60 characters
//	    (trailing '-' trimmed so the name stays a valid DNS-1123 label).
//	  - hash: when the whole Task name fits, the first 5 hex digits of
//	    sha256(task UID), so a deleted and re-created Task never adopts or
//	    collides with its predecessor's Jobs (which may still be
//	    terminating); when the name is cut, 12 hex digits of
//	    sha256(name, UID), so Tasks whose names share the kept part do not
//	    collide either.
//	  - runID: which run ("0", "s<unix>", "m<hash>": runs/ids.go) the Job belongs to.
//	  - attempt: the 1-based attempt within the run; one Job per attempt.
//
// The result is a valid DNS-1123 label (and therefore subdomain) of at most
// 60 characters for every Task name admission accepts.
func Name(task *v1alpha1.Task, runID string, attempt int32) string {
	tail := "-" + runID + "-" + strconv.FormatInt(int64(attempt), 10)
	prefix := labelSafe(task.Name)
	if short := "-" + uidHash(task) + tail; len(prefix)+len(short) <= maxNameLength {
		return join(prefix, short)
	}
	long := "-" + cutHash(task) + tail
	return join(prefix[:max(maxNameLength-len(long), 0)], long)
}

// LegacyName is the name earlier builds gave (5 hex digits of the UID's
// hash even when the Task name was cut); the same as Name for
// every Task whose name fits. Jobs of cut names made before an upgrade
// keep it: the operator finds them by their labels and owner, and where it
// looks one up by name it tries both (Names).
func LegacyName(task *v1alpha1.Task, runID string, attempt int32) string {
	short := "-" + uidHash(task) + "-" + runID + "-" + strconv.FormatInt(int64(attempt), 10)
	prefix := labelSafe(task.Name)
	return join(prefix[:min(len(prefix), max(maxNameLength-len(short), 0))], short)
}

// Names are the names the Job of an attempt may have: Name, then
// LegacyName when it differs.
func Names(task *v1alpha1.Task, runID string, attempt int32) []string {
	name, legacy := Name(task, runID, attempt), LegacyName(task, runID, attempt)
	if legacy == name {
		return []string{name}
	}
	return []string{name, legacy}
}

// join puts the Task name part and the suffix together. Truncation may end
// the prefix on '-', which would give "--" (valid, but ugly) or, for an
// empty prefix, a leading '-' (invalid).
func join(prefix, suffix string) string {
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

// cutHash is the hash of the Task's whole name and UID used in the Job
// names of a Task whose name is cut.
func cutHash(task *v1alpha1.Task) string {
	sum := sha256.Sum256([]byte(task.Name + "/" + string(task.UID)))
	return hex.EncodeToString(sum[:])[:cutHashLength]
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

// TaskOf reads a Job name Name made back into the name of its Task, for
// a Task whose whole name fits (the hash part has uidHashLength digits):
// everything before the hash, the run id and the attempt. ok is false for
// a name made from a cut Task name, which cannot be read back. The answer
// is a name to look a Task up by; Owns tells whether the Task found under
// it is the one (a Task re-created under the same name is not).
func TaskOf(jobName string) (task string, ok bool) {
	parts := strings.Split(jobName, "-")
	if len(parts) < 4 || len(parts[len(parts)-3]) != uidHashLength {
		return "", false
	}
	return strings.Join(parts[:len(parts)-3], "-"), true
}

// Owns reports whether jobName is the name of one of task's Jobs: the name
// Name (or LegacyName) gives it for the run id and attempt jobName ends
// with.
func Owns(task *v1alpha1.Task, jobName string) bool {
	parts := strings.Split(jobName, "-")
	if len(parts) < 3 {
		return false
	}
	attempt, err := strconv.ParseInt(parts[len(parts)-1], 10, 32)
	if err != nil {
		return false
	}
	return slices.Contains(Names(task, parts[len(parts)-2], int32(attempt)), jobName)
}
