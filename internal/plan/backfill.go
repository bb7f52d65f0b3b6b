package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// Backfill: a request (batch.taskops.io/backfill with
// batch.taskops.io/backfill-range, one Task version) runs every slot of the
// range that has no run, oldest first, with its normal slot id.
//
// The invariant: a slot's run starts at most once. The status keeps a
// cursor, the newest slot started; only slots after it are considered,
// and of those only ones no run has (the Jobs and the history know it):
// after a restart, or a lost status write, nothing starts twice, and Jobs
// pruned by the history limits do not make an old slot run again. The
// counts are recomputed from the slots and the runs each pass.

// planBackfill adds the starts of a running backfill to the plan and
// decides its new status (p.Backfill; nil: unchanged).
func (d *decision) planBackfill(schedule *scheduler.Schedule, steps map[string]retry.Step, known map[string]bool) {
	task, p := d.task, &d.p
	token := task.Annotations[v1alpha1.AnnotationBackfill]
	if token == "" {
		return
	}
	cur := task.Status.Backfill
	if schedule == nil {
		if cur == nil || cur.Token != token {
			p.Backfill = &v1alpha1.BackfillStatus{Token: token, State: v1alpha1.BackfillRefused,
				Message: "a one-shot Task has no slots to backfill: the Task needs spec.schedule"}
		}
		return
	}
	if cur == nil || cur.Token != token {
		cur = d.newBackfill(token)
		p.Backfill = cur
	}
	if cur.State != v1alpha1.BackfillRunning {
		return
	}
	bf := cur.DeepCopy()
	slots, err := schedule.SlotsIn(bf.From.Time, bf.To.Time, scheduler.MaxBackfillSlots)
	if err != nil {
		bf.State, bf.Message = v1alpha1.BackfillRefused, fmt.Sprintf("%v; split it into ranges of at most %d slots", err, scheduler.MaxBackfillSlots)
		p.Backfill = bf
		return
	}
	if d.p.CancelToken != "" {
		bf.State, bf.Message = v1alpha1.BackfillCancelled, "a cancel token stopped it"
		p.Backfill = d.count(bf, slots, steps)
		return
	}
	// The runs active or starting this pass (a queued new run is among
	// the starts), each once.
	busy := map[string]bool{}
	for _, r := range d.rs {
		if steps[r.ID].Active() {
			busy[r.ID] = true
		}
	}
	for _, st := range p.Start {
		busy[st.RunID] = true
	}
	active := len(busy)
	room := 1 // Forbid (and Replace: a backfill never stops a run): one at a time
	if task.Spec.ConcurrencyPolicy == v1alpha1.AllowConcurrent {
		room = scheduler.MaxActiveRuns
	}
	if task.Spec.QueueName != "" {
		// Every start may wait in the queue's line, where a Task holds at
		// most MaxQueued places: a backfill slot beyond them would be
		// dropped as missed, so it waits for a later pass instead.
		room = min(room, active+MaxQueued-len(p.Start))
	}
	suspended := task.Spec.Suspend != nil && *task.Spec.Suspend
	for _, t := range slots {
		if bf.Cursor != nil && !t.After(bf.Cursor.Time) {
			continue
		}
		id := runs.ScheduledID(t)
		if !known[id] {
			if suspended || active >= room {
				break
			}
			at := t
			values, _ := d.runParams(id) // a slot's: the defaults, which a cron Task's params all have (admission)
			p.Start = append(p.Start, Start{RunID: id, Attempt: 1, Scheduled: &at, Params: values})
			active++
		}
		bf.Cursor = status.Time(t)
	}
	p.Backfill = d.count(bf, slots, steps)
}

// newBackfill reads a new request; a request that cannot be done is
// Refused with the reason, and nothing starts.
func (d *decision) newBackfill(token string) *v1alpha1.BackfillStatus {
	bf := &v1alpha1.BackfillStatus{Token: token, State: v1alpha1.BackfillRunning}
	refuse := func(format string, args ...any) *v1alpha1.BackfillStatus {
		bf.State, bf.Message = v1alpha1.BackfillRefused, fmt.Sprintf(format, args...)
		return bf
	}
	if len(token) > v1alpha1.MaxRunNowTokenLength {
		bf.Token = token[:v1alpha1.MaxRunNowTokenLength]
		return refuse("the token is longer than %d characters", v1alpha1.MaxRunNowTokenLength)
	}
	raw := d.task.Annotations[v1alpha1.AnnotationBackfillRange]
	a, b, ok := strings.Cut(raw, "/")
	from, errFrom := time.Parse(time.RFC3339, strings.TrimSpace(a))
	to, errTo := time.Parse(time.RFC3339, strings.TrimSpace(b))
	switch {
	case raw == "":
		return refuse("no %s annotation with it", v1alpha1.AnnotationBackfillRange)
	case !ok || errFrom != nil || errTo != nil:
		return refuse("%s %q is not <from>/<to> in RFC 3339 (2026-11-30T00:00:00Z/2026-12-01T00:00:00Z)", v1alpha1.AnnotationBackfillRange, raw)
	case to.Before(from):
		return refuse("the range ends before it begins")
	case to.After(d.now):
		return refuse("the range ends in the future (%s); a backfill runs slots that are past", to.UTC().Format(time.RFC3339))
	}
	// The range's slots (and so Total, and a refusal for too many) are
	// planBackfill's, computed once a pass.
	bf.From, bf.To = status.Time(from), status.Time(to)
	return bf
}

// count sets the request's counts from its slots and the runs: started
// are the slots up to the cursor, finished those of them whose run is not
// unfinished (runs that ended are pruned in time, unfinished ones never).
func (d *decision) count(bf *v1alpha1.BackfillStatus, slots []time.Time, steps map[string]retry.Step) *v1alpha1.BackfillStatus {
	bf.Total = int32(len(slots))
	unfinished := map[string]bool{}
	for _, r := range d.rs {
		if !steps[r.ID].Finished() {
			unfinished[r.ID] = true
		}
	}
	for _, q := range d.pending {
		unfinished[q.RunID] = true
	}
	for _, s := range d.p.Start {
		unfinished[s.RunID] = true
	}
	bf.Started, bf.Finished = 0, 0
	for _, t := range slots {
		if bf.Cursor == nil || t.After(bf.Cursor.Time) {
			break
		}
		bf.Started++
		if !unfinished[runs.ScheduledID(t)] {
			bf.Finished++
		}
	}
	if bf.State == v1alpha1.BackfillRunning && bf.Finished == bf.Total {
		bf.State, bf.Message = v1alpha1.BackfillFinished, fmt.Sprintf("%d slot(s) of the range ran", bf.Total)
	}
	return bf
}
