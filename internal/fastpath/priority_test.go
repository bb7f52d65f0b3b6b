package fastpath

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestJobEventsQueueBehindWorkToStart(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	recorded := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "recorded"}}
	started := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "started"}}

	AtRecordPriority(q).Add(recorded) // a Job event, first
	q.Add(started)                    // a new Task, after it

	first, prio, _ := q.GetWithPriority()
	if first != started || prio != StartPriority {
		t.Fatalf("first out: %v at %d, want %v at %d", first, prio, started, StartPriority)
	}
	second, prio, _ := q.GetWithPriority()
	if second != recorded || prio != RecordPriority {
		t.Fatalf("second out: %v at %d, want %v at %d", second, prio, recorded, RecordPriority)
	}
}

func TestAJobEventDoesNotLowerATaskAlreadyQueuedToStart(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "t"}}
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(StartPriority)}, req)
	AtRecordPriority(q).Add(req)
	if _, prio, _ := q.GetWithPriority(); prio != StartPriority {
		t.Fatalf("priority %d, want %d", prio, StartPriority)
	}
}

func TestAFinishedJobQueuesBehindWorkToStartAndAheadOfOtherRecords(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	h := RecordingHandler{handler.EnqueueRequestForOwner(taskScheme(), taskMapper(), &v1alpha1.Task{}, handler.OnlyControllerOwner())}
	ctx := context.Background()

	created := ownedJob("created")
	h.Create(ctx, event.CreateEvent{Object: created}, q) // the record of a new Job
	running, finished := ownedJob("finished"), ownedJob("finished")
	finished.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	running.ResourceVersion, finished.ResourceVersion = "1", "2" // equal ones are a resync, at LowPriority
	h.Update(ctx, event.UpdateEvent{ObjectOld: running, ObjectNew: finished}, q)
	q.Add(req("started")) // a new Task, last

	for _, want := range []struct {
		name string
		prio int
	}{{"started", StartPriority}, {"finished", FinishPriority}, {"created", RecordPriority}} {
		got, prio, _ := q.GetWithPriority()
		if got != req(want.name) || prio != want.prio {
			t.Fatalf("out: %v at %d, want %s at %d", got, prio, want.name, want.prio)
		}
		q.Done(got)
	}
}

func TestOnlyTheUpdateThatFinishesAJobIsItsFinish(t *testing.T) {
	withCond := func(typ batchv1.JobConditionType, st corev1.ConditionStatus) *batchv1.Job {
		j := ownedJob("t")
		j.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: st}}
		return j
	}
	for _, tc := range []struct {
		name     string
		old, new *batchv1.Job
		want     bool
	}{
		{"running to complete", ownedJob("t"), withCond(batchv1.JobComplete, corev1.ConditionTrue), true},
		{"running to failed", ownedJob("t"), withCond(batchv1.JobFailed, corev1.ConditionTrue), true},
		{"complete to complete (a later update)", withCond(batchv1.JobComplete, corev1.ConditionTrue), withCond(batchv1.JobComplete, corev1.ConditionTrue), false},
		{"failure target only (pods still terminating)", ownedJob("t"), withCond(batchv1.JobFailureTarget, corev1.ConditionTrue), false},
		{"a false Complete condition", ownedJob("t"), withCond(batchv1.JobComplete, corev1.ConditionFalse), false},
		{"running to running", ownedJob("t"), ownedJob("t"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := finishedNow(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("finishedNow = %v, want %v", got, tc.want)
			}
		})
	}
}

// ownedJob is a Job controlled by the Task named task.
func ownedJob(task string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: task + "-job", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task", Name: task, UID: types.UID(task), Controller: ptr.To(true),
	}}}}
}

// taskScheme knows the Task kind.
func taskScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// taskMapper maps the Task kind for handler.EnqueueRequestForOwner.
func taskMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{v1alpha1.GroupVersion})
	m.Add(v1alpha1.GroupVersion.WithKind("Task"), meta.RESTScopeNamespace)
	return m
}

// The order of the starts: an admitted Task's pass (its place in the
// queue held), then one woken for a line write's place (that place held,
// and the next admission may wait for its write), then new Tasks (within
// their namespace's fair share first), each added before the one ahead
// of it.
func TestAdmittedThenLineWakesThenNewTasks(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	ctx := context.Background()
	task := func(name string) event.TypedGenericEvent[*v1alpha1.Task] {
		return event.TypedGenericEvent[*v1alpha1.Task]{Object: &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}}
	}
	q.Add(req("new"))
	AtPriority(q, FairStartPriority).Add(req("fair"))
	LineWakeHandler.Generic(ctx, task("woken"), q)
	AdmittedHandler.Generic(ctx, task("admitted"), q)

	for _, want := range []struct {
		name string
		prio int
	}{{"admitted", AdmitPriority}, {"woken", LineWakePriority}, {"fair", FairStartPriority}, {"new", StartPriority}} {
		got, prio, _ := q.GetWithPriority()
		if got != req(want.name) || prio != want.prio {
			t.Fatalf("out: %v at %d, want %s at %d", got, prio, want.name, want.prio)
		}
		q.Done(got)
	}
}
