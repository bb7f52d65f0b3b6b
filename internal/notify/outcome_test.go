package notify

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func rec(id string, r v1alpha1.RunResult) v1alpha1.RunRecord {
	return v1alpha1.RunRecord{RunID: id, Result: r}
}

func TestARunIsRecoveredOnlyWhenTheRunBeforeItFailed(t *testing.T) {
	ok, failed := v1alpha1.RunResultSucceeded, v1alpha1.RunResultFailed
	for _, tc := range []struct {
		name    string
		history []v1alpha1.RunRecord // newest first; [0] is the run told about
		want    v1alpha1.NotifyOn
		told    bool
	}{
		{"a first success is Succeeded", []v1alpha1.RunRecord{rec("s3", ok)}, v1alpha1.NotifyOnSucceeded, true},
		{"a success after a success is Succeeded", []v1alpha1.RunRecord{rec("s3", ok), rec("s2", ok)}, v1alpha1.NotifyOnSucceeded, true},
		{"a success after a failure is Recovered", []v1alpha1.RunRecord{rec("s3", ok), rec("s2", failed)}, v1alpha1.NotifyOnRecovered, true},
		{"a cancelled run between is passed over", []v1alpha1.RunRecord{rec("s3", ok), rec("s2", v1alpha1.RunResultCancelled), rec("s1", failed)}, v1alpha1.NotifyOnRecovered, true},
		{"a failure is Failed", []v1alpha1.RunRecord{rec("s3", failed), rec("s2", failed)}, v1alpha1.NotifyOnFailed, true},
		{"a stopped run is not told", []v1alpha1.RunRecord{rec("s3", v1alpha1.RunResultStopped)}, "", false},
		{"a running run is not told", []v1alpha1.RunRecord{rec("s3", v1alpha1.RunResultRunning)}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, told := Event(tc.history[0], Previous(tc.history, 0))
			if got != tc.want || told != tc.told {
				t.Fatalf("Event = %q, %v; want %q, %v", got, told, tc.want, tc.told)
			}
		})
	}
}

func TestAnEntryListingSucceededHearsOfARecoveryAndOneListingRecoveredOnlyOfThat(t *testing.T) {
	entries := []v1alpha1.Notification{
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}},
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnSucceeded}},
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnRecovered}},
	}
	for ev, want := range map[v1alpha1.NotifyOn][]int{
		v1alpha1.NotifyOnFailed: {0}, v1alpha1.NotifyOnSucceeded: {1}, v1alpha1.NotifyOnRecovered: {1, 2},
	} {
		if got := Targets(entries, ev); len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) || (len(got) > 1 && got[1] != want[1]) {
			t.Errorf("Targets(%s) = %v, want %v", ev, got, want)
		}
	}
}

func TestANotificationIsDueWhilePendingWithoutAJob(t *testing.T) {
	pending := v1alpha1.RunRecord{RunID: "s2", Result: v1alpha1.RunResultFailed, Notification: v1alpha1.NotificationPending}
	if got := Due([]v1alpha1.RunRecord{pending}, nil); len(got) != 1 {
		t.Fatalf("pending, no Job: Due = %v, want s2", got)
	}
	if got := Due([]v1alpha1.RunRecord{pending}, map[string]Job{"s2": {Name: "j", RunID: "s2"}}); len(got) != 0 {
		t.Fatalf("pending, its Job seen: Due = %v, want none", got)
	}
	recorded := pending
	recorded.NotificationJob = "j"
	if got := Due([]v1alpha1.RunRecord{recorded}, nil); len(got) != 0 {
		t.Fatalf("pending, its Job recorded (and gone: deleted): Due = %v, want none", got)
	}
	sent := pending
	sent.Notification = v1alpha1.NotificationSent
	if got := Due([]v1alpha1.RunRecord{sent}, nil); len(got) != 0 {
		t.Fatalf("sent: Due = %v, want none", got)
	}
}

// A refused create is tried again at a pace set by the time since the
// run ended (nothing stored), between 1 s and 30 s, until the deadline.
func TestARefusedNotificationIsTriedAgainAtAPaceAndUntilADeadline(t *testing.T) {
	end := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	rec := v1alpha1.RunRecord{RunID: "0", CompletionTime: &end}
	for _, tc := range []struct {
		since time.Duration
		want  time.Duration
	}{{0, time.Second}, {2 * time.Second, time.Second}, {20 * time.Second, 5 * time.Second}, {10 * time.Minute, 30 * time.Second}} {
		if got := RetryAfter(rec, end.Add(tc.since)); got != tc.want {
			t.Errorf("%s after the end: RetryAfter = %s, want %s", tc.since, got, tc.want)
		}
	}
	if PastDeadline(rec, end.Add(DefaultDeadline-time.Second), DefaultDeadline) || !PastDeadline(rec, end.Add(DefaultDeadline), DefaultDeadline) {
		t.Error("the deadline is the run's end plus DefaultDeadline, inclusive")
	}
	if PastDeadline(v1alpha1.RunRecord{RunID: "0"}, end.Time, time.Second) {
		t.Error("a run with no end time is never past its deadline")
	}
}

func TestNotificationJobsAreReadByRunAndAttemptJobsAreNot(t *testing.T) {
	owner := metav1.OwnerReference{UID: "u1", Controller: ptr.To(true)}
	job := func(name string, labels map[string]string, cond batchv1.JobConditionType) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}}}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
		}
		return j
	}
	got := FromJobs("u1", []batchv1.Job{
		job("t-abcde-s1-1", map[string]string{v1alpha1.LabelRun: "s1", v1alpha1.LabelAttempt: "1"}, batchv1.JobFailed),
		job("t-abcde-s1-n", map[string]string{v1alpha1.LabelNotification: "s1"}, batchv1.JobComplete),
		job("t-abcde-s2-n", map[string]string{v1alpha1.LabelNotification: "s2"}, batchv1.JobFailed),
		job("t-abcde-s3-n", map[string]string{v1alpha1.LabelNotification: "s3"}, ""),
	})
	if len(got) != 3 || !got["s1"].Sent || got["s2"].Sent || !got["s2"].Finished || got["s3"].Finished {
		t.Fatalf("FromJobs = %+v", got)
	}
	if s, done := Resolve(got["s1"], true); !done || s != v1alpha1.NotificationSent {
		t.Errorf("s1 resolves to %s, %v", s, done)
	}
	if s, done := Resolve(got["s2"], true); !done || s != v1alpha1.NotificationFailed {
		t.Errorf("s2 resolves to %s, %v", s, done)
	}
	if _, done := Resolve(got["s3"], true); done {
		t.Errorf("an unfinished Job resolved")
	}
	if _, done := Resolve(Job{}, false); done {
		t.Errorf("an unseen Job resolved")
	}
}

// The orders a new status gives are the whole decision about
// notifications: which runs, what each tells (a success after a failure
// is Recovered), and which spec.notify entries hear it.
func TestOrdersAreTheDueRunsWithTheirDocumentAndTargets(t *testing.T) {
	task := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nightly"}}
	task.Spec.Notify = []v1alpha1.Notification{
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}},
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnRecovered}},
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnSucceeded}},
	}
	failed := rec("s1", v1alpha1.RunResultFailed)
	failed.Notification = v1alpha1.NotificationSent
	ok := rec("s2", v1alpha1.RunResultSucceeded)
	ok.Notification = v1alpha1.NotificationPending
	updated := []v1alpha1.RunRecord{ok, failed} // newest first

	got := Orders(task, updated, nil)
	if len(got) != 1 {
		t.Fatalf("%d orders, want one (s2; s1 was decided before)", len(got))
	}
	o := got[0]
	if o.RunID != "s2" || o.Document.Event != v1alpha1.NotifyOnRecovered || o.Document.Namespace != "team-a" || o.Document.Task != "nightly" {
		t.Errorf("order %+v: want run s2 told as Recovered for team-a/nightly", o)
	}
	if want := []int{1, 2}; len(o.Targets) != 2 || o.Targets[0] != want[0] || o.Targets[1] != want[1] {
		t.Errorf("targets %v, want %v (the Recovered entry and the Succeeded one)", o.Targets, want)
	}
	if again := Orders(task, updated, map[string]Job{"s2": {Name: "n-s2", RunID: "s2"}}); len(again) != 0 {
		t.Errorf("with the Job of the order seen: %v, want none", again)
	}
}
