package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The run-id grammar. A run id names one execution the user asked for and
// goes into Job names and the batch.taskops.io/run label, so every form is
// short and label-safe:
//
//	"0"            the initial run of a one-shot Task (OneShot)
//	"s<unix secs>" the run of a cron slot (ScheduledID)
//	"m<10 hex>"    the run a run-now token started (RunNowID)
//	"a<10 hex>"    the run upstream runs started (ChainID, spec.after)

// OneShot is the run id of the initial run of a one-shot Task (a Task
// without spec.schedule).
const OneShot = "0"

// runNowHashLength is how many hex digits of sha256(token) make a run-now
// run id.
const runNowHashLength = 10

// ScheduledID is the run id of the scheduled run for a cron slot:
// "s<unix seconds of the slot>". Unix seconds are label-safe and the same
// whatever the Task's time zone, so a restart computes the same id.
func ScheduledID(slot time.Time) string {
	return "s" + strconv.FormatInt(slot.Unix(), 10)
}

// SlotOf is the slot of a scheduled run id ("s<unix seconds>").
func SlotOf(runID string) (time.Time, bool) {
	if !strings.HasPrefix(runID, "s") {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(runID[1:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0).UTC(), true
}

// TokenHash is the lowercase hex sha256 of a run-now token. The status
// records this hash (not the token) as the last consumed token.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// RunNowID is the run id of the run started by a run-now token:
// "m<first 10 hex digits of sha256(token)>". Hashing makes any token (it is
// free text in an annotation) label-safe and bounded.
func RunNowID(token string) string {
	return "m" + TokenHash(token)[:runNowHashLength]
}

// IsRunNow reports whether a run id was started by a run-now token. Such a
// run keeps retrying while the Task is suspended.
func IsRunNow(runID string) bool { return strings.HasPrefix(runID, "m") }

// RunNowToken is the run-now token that started run runID, as the user
// wrote it: what an attempt of the run (run, nil when it has none yet)
// recorded, else the Task's run-now annotation when it names this run (a
// new run, or one that ended before it had a Job). "" when neither knows
// it, or for runs no token started.
func RunNowToken(annotation, runID string, run *Run) string {
	if !IsRunNow(runID) {
		return ""
	}
	if run != nil {
		for _, a := range run.Attempts {
			if a.RunNowTokenValue != "" {
				return a.RunNowTokenValue
			}
		}
	}
	return TokenForRun(annotation, runID)
}

// TokenForRun is token when it started run runID and is short enough to
// be recorded (v1alpha1.MaxRunNowTokenLength), else "".
func TokenForRun(token, runID string) string {
	if token == "" || len(token) > v1alpha1.MaxRunNowTokenLength || RunNowID(token) != runID {
		return ""
	}
	return token
}

// ChainID is the run id of the run that upstream runs started (spec.after):
// "a<first 10 hex digits of sha256 of their refs>", sorted, so the same
// upstream runs always make the same id and never start a second run.
func ChainID(trigger []v1alpha1.TriggerRef) string {
	keys := make([]string, 0, len(trigger))
	for _, t := range trigger {
		keys = append(keys, t.Task+"/"+t.RunID)
	}
	slices.Sort(keys)
	return "a" + TokenHash(strings.Join(keys, ","))[:runNowHashLength]
}

// IsChained reports whether a run id was started by upstream runs.
func IsChained(runID string) bool { return strings.HasPrefix(runID, "a") }

// EncodeTrigger is a run's trigger as its Jobs record it
// (v1alpha1.AnnotationTrigger); "" for none.
func EncodeTrigger(trigger []v1alpha1.TriggerRef) string { return encodeList(trigger) }

// DecodeTrigger reads EncodeTrigger's text; nil when empty or unreadable
// (someone edited the annotation: the run then records no trigger).
func DecodeTrigger(s string) []v1alpha1.TriggerRef { return decodeList[v1alpha1.TriggerRef](s) }

// encodeList is a list as an annotation keeps it, JSON; "" for none.
func encodeList[T any](list []T) string {
	if len(list) == 0 {
		return ""
	}
	b, err := json.Marshal(list)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeList reads encodeList's text; nil when empty or unreadable (an
// annotation edited by hand).
func decodeList[T any](s string) []T {
	if s == "" {
		return nil
	}
	var out []T
	if json.Unmarshal([]byte(s), &out) != nil {
		return nil
	}
	return out
}
