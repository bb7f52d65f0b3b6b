//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// cronCase is one cron Task of the downtime scenario.
type cronCase struct {
	name     string
	deadline *int64 // startingDeadlineSeconds
	catchUp  bool   // a catch-up run is expected at the restart
}

// Scenario 4, cron downtime: cron Tasks with and without
// startingDeadlineSeconds run a few slots, the operator is stopped across
// several slots and restarted a few seconds after a slot: at most one
// catch-up run (the newest missed slot), none past the starting deadline,
// the missed slots reported (MissedSchedules, SlotSkipped events), and
// scheduling resumes. "@every 10s" always; "* * * * *" in full mode.
func TestS04CronDowntime(t *testing.T) {
	slowScenario(t)
	t.Run("every 10s", func(t *testing.T) {
		cronDowntime(t, "@every 10s", 10*time.Second, 3, 4*time.Second, []cronCase{
			{name: "every-nodeadline", catchUp: true},
			{name: "every-deadline-2s", deadline: ptr.To[int64](2)},
			{name: "every-deadline-9s", deadline: ptr.To[int64](9), catchUp: true},
		})
	})
	t.Run("every minute", func(t *testing.T) {
		cronDowntime(t, "* * * * *", time.Minute, 2, 30*time.Second, []cronCase{
			{name: "minute-nodeadline", catchUp: true},
			{name: "minute-deadline-20s", deadline: ptr.To[int64](20)},
			{name: "minute-deadline-50s", deadline: ptr.To[int64](50), catchUp: true},
		})
	})
}

var missedRe = regexp.MustCompile(`(\d+) earlier slot\(s\) were missed; only the newest slot, (\S+), was considered`)

// cronDowntime runs the scenario for one schedule of the given period: the
// operator is stopped right after a run and restarted offset after the
// slotsDown-th slot since the last run.
func cronDowntime(t *testing.T, schedule string, period time.Duration, slotsDown int, offset time.Duration, cases []cronCase) {
	ns := s.newNamespace(t, "rel-cron", false)
	op := s.startOperator(t, "op", false)
	rec := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)
	for _, c := range cases {
		create(t, testutil.NewTask(ns, c.name, testutil.Schedule(schedule), func(task *v1alpha1.Task) { task.Spec.StartingDeadlineSeconds = c.deadline }))
	}
	// Scheduling works: two runs each (one for a minute schedule).
	before := 2
	if period >= time.Minute {
		before = 1
	}
	// The status, not only the Jobs: the record of a run may follow its
	// Job by a few seconds (the operator waits for a short run's end to
	// write its start and end at once), and the restart is timed from
	// status.lastScheduleTime.
	harness.Eventually(t, time.Duration(before+1)*period+time.Minute, "runs of every cron Task, in their status", note(op), func(ctx context.Context) (bool, string) {
		var list batchv1.JobList
		if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		runs := map[string]int{}
		newest := map[string]string{}
		for _, j := range list.Items {
			if harness.JobCondition(&j, batchv1.JobComplete) != nil {
				task := j.Labels[v1alpha1.LabelTask]
				runs[task]++
				newest[task] = max(newest[task], j.Annotations[v1alpha1.AnnotationScheduledTime])
			}
		}
		for _, c := range cases {
			if runs[c.name] < before {
				return false, fmt.Sprintf("finished runs %v", runs)
			}
			task, err := harness.GetTask(ctx, s.c, ns, c.name)
			if err != nil {
				return false, err.Error()
			}
			if st := task.Status.LastScheduleTime; st == nil || st.UTC().Format(time.RFC3339) < newest[c.name] {
				return false, fmt.Sprintf("%s: lastScheduleTime %v, newest finished run's slot %s", c.name, st, newest[c.name])
			}
		}
		return true, ""
	})
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	ctx := ctxFor(t, 20*time.Second)
	last := map[string]time.Time{}
	for _, c := range cases {
		task, err := harness.GetTask(ctx, s.c, ns, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.LastScheduleTime == nil {
			t.Fatalf("%s has no lastScheduleTime", c.name)
		}
		last[c.name] = task.Status.LastScheduleTime.Time
	}
	ref := last[cases[0].name]
	restartAt := ref.Add(time.Duration(slotsDown)*period + offset)
	for restartAt.Before(stopped.Add(time.Duration(slotsDown-1) * period)) {
		restartAt = restartAt.Add(period)
	}
	t.Logf("operator stopped at %s (last slots %s); restarting at %s", stopped.UTC().Format(time.TimeOnly), fmtSlots(last), restartAt.UTC().Format(time.TimeOnly))
	time.Sleep(time.Until(restartAt))
	if _, err := op.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	down := restarted.Sub(stopped)
	// Scheduling resumes: a run for a slot after the restart, for each.
	harness.Eventually(t, period+time.Minute, "a run after the restart for every cron Task", note(op), func(ctx context.Context) (bool, string) {
		var list batchv1.JobList
		if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		resumed := map[string]bool{}
		for _, j := range list.Items {
			if slot, ok := runs.SlotOf(j.Labels[v1alpha1.LabelRun]); ok && slot.After(restarted) {
				resumed[j.Labels[v1alpha1.LabelTask]] = true
			}
		}
		return len(resumed) == len(cases), fmt.Sprintf("resumed: %v", resumed)
	})
	seen := rec.All(t)
	for k, js := range harness.Duplicates(seen) {
		t.Errorf("%d Jobs for Task %s run %s attempt %s: %v", len(js), k.Task, k.Run, k.Attempt, js)
	}
	ctx = ctxFor(t, 30*time.Second)
	var evs corev1.EventList
	if err := s.c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, c := range cases {
		var during, after []string
		var catchUp *batchv1.Job
		for i := range seen {
			j := &seen[i]
			if j.Labels[v1alpha1.LabelTask] != c.name {
				continue
			}
			slot, ok := runs.SlotOf(j.Labels[v1alpha1.LabelRun])
			if !ok {
				t.Errorf("%s: Job %s has run id %q", c.name, j.Name, j.Labels[v1alpha1.LabelRun])
				continue
			}
			switch {
			case slot.After(last[c.name]) && !slot.After(restarted):
				during = append(during, j.Labels[v1alpha1.LabelRun])
				catchUp = j
			case slot.After(restarted):
				after = append(after, j.Labels[v1alpha1.LabelRun])
			}
		}
		// Slots that fell due while the operator was down, the newest one last.
		var downSlots []time.Time
		for at := last[c.name].Add(period); !at.After(restarted); at = at.Add(period) {
			downSlots = append(downSlots, at)
		}
		newest := downSlots[len(downSlots)-1]
		if len(during) > 1 {
			t.Errorf("%s: %d catch-up runs %v for the %d slots missed while the operator was down; want at most 1", c.name, len(during), during, len(downSlots))
		}
		lag := time.Duration(0)
		if catchUp != nil {
			slot, _ := runs.SlotOf(catchUp.Labels[v1alpha1.LabelRun])
			lag = catchUp.CreationTimestamp.Sub(slot)
			if !slot.Equal(newest) {
				t.Errorf("%s: the catch-up run is for slot %s, not the newest missed one (%s)", c.name, slot.UTC().Format(time.TimeOnly), newest.UTC().Format(time.TimeOnly))
			}
			if c.deadline != nil && lag > time.Duration(*c.deadline+1)*time.Second {
				t.Errorf("%s: the catch-up run started %s after its slot, past startingDeadlineSeconds %d", c.name, harness.Secs(lag), *c.deadline)
			}
		}
		if c.catchUp && catchUp == nil {
			t.Errorf("%s: no catch-up run for the newest missed slot %s (restart %s after it; deadline %v)", c.name, newest.UTC().Format(time.TimeOnly), harness.Secs(restarted.Sub(newest)), ptrString(c.deadline))
		}
		if !c.catchUp && catchUp != nil {
			t.Errorf("%s: a catch-up run %s started %s after its slot, past startingDeadlineSeconds %s", c.name, catchUp.Name, harness.Secs(lag), ptrString(c.deadline))
		}
		if len(after) == 0 {
			t.Errorf("%s: no run for a slot after the restart: scheduling did not resume", c.name)
		}
		// What the events say about the missed slots.
		missed, skipped := -1, false
		for _, e := range evs.Items {
			if e.InvolvedObject.Name != c.name || e.LastTimestamp.Time.Before(restarted.Add(-time.Second)) && e.EventTime.Time.Before(restarted.Add(-time.Second)) {
				continue
			}
			if m := missedRe.FindStringSubmatch(e.Message); m != nil {
				missed, _ = strconv.Atoi(m[1])
			}
			if e.Reason == string(v1alpha1.EventSlotSkipped) && strings.Contains(e.Message, "startingDeadlineSeconds") {
				skipped = true
			}
		}
		if want := len(downSlots) - 1; missed != want {
			t.Errorf("%s: MissedSchedules event says %d earlier slots were missed, want %d (%d slots fell due while down)", c.name, missed, want, len(downSlots))
		}
		if !c.catchUp && !skipped {
			t.Errorf("%s: no SlotSkipped event for the slot past its starting deadline", c.name)
		}
		task, _ := harness.GetTask(ctx, s.c, ns, c.name)
		if task.Status.LastScheduleTime == nil || task.Status.LastScheduleTime.Time.Before(newest) {
			t.Errorf("%s: lastScheduleTime %v is before the newest missed slot %s", c.name, task.Status.LastScheduleTime, newest.UTC().Format(time.TimeOnly))
		}
		what := "no catch-up run"
		if catchUp != nil {
			what = fmt.Sprintf("1 catch-up run %s after its slot", harness.Secs(lag))
		}
		summary = append(summary, fmt.Sprintf("%s (deadline %s): %d slots missed, %s, MissedSchedules=%d, %d runs after the restart", c.name, ptrString(c.deadline), len(downSlots), what, missed, len(after)))
	}
	events := checkMonitor(t, mon)
	sort.Strings(summary)
	figure(t, "%q: operator down %s across the slots; restarted %s after the newest missed slot of %s: %s; %d Jobs, 0 duplicate runs wanted (got %d), %d Task versions watched, %d steps backwards",
		schedule, harness.Secs(down), harness.Secs(restarted.Sub(restartAt)+offset), cases[0].name, strings.Join(summary, "; "), len(seen), len(harness.Duplicates(seen)), events, len(mon.Problems()))
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatInt(*p, 10) + "s"
}

func fmtSlots(m map[string]time.Time) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v.UTC().Format(time.TimeOnly))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
