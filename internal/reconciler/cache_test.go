package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// jobTransform is the cache transform CacheOptions sets for Jobs.
func jobTransform(t *testing.T) toolscache.TransformFunc {
	t.Helper()
	for obj, by := range reconciler.CacheOptions(false).ByObject {
		if _, ok := obj.(*batchv1.Job); ok {
			if by.Transform == nil {
				t.Fatal("CacheOptions sets no Transform for Jobs")
			}
			return by.Transform
		}
	}
	t.Fatal("CacheOptions has no ByObject entry for Jobs")
	return nil
}

// fullJob is a Job as the API server returns it: built by jobs.Build (an
// http Task with 3 replicas and env, so the pod template and the pod
// failure policy are as big as they get), with server-set metadata and
// spec, managed fields, and a status with every field set.
func fullJob(now time.Time) (*v1alpha1.Task, *batchv1.Job) {
	task := newTask("cache-ns", "cache-task", testutil.HTTP("https://example.com/hook"), testutil.Replicas(3), func(t *v1alpha1.Task) {
		t.UID = types.UID("8d3c4a8e-0d6f-4f0e-9a43-5b6c5b0e1f01")
		t.Generation = 4
		t.Spec.Env = []v1alpha1.EnvVar{{Name: "A", Value: ptr.To("b")}}
	})
	scheduled := now.Add(-time.Hour).Truncate(time.Minute)
	job := jobs.Build(task, "s1", 2, &scheduled, nil, jobOpts)
	job.UID = "0c1d2e3f-aaaa-bbbb-cccc-000000000001"
	job.ResourceVersion = "4242"
	job.Generation = 2
	job.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Minute).Truncate(time.Second))
	job.Annotations[v1alpha1.AnnotationRunNowToken] = "tokenhash"
	job.Annotations["example.com/big-note"] = strings.Repeat("x", 1000) // not the operator's: trimmed
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(job.UID)}}
	job.Spec.Suspend = ptr.To(false)
	job.Spec.ManagedBy = ptr.To(v1alpha1.MultiKueueManagedBy)
	job.Spec.ManualSelector = ptr.To(false)
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	job.Spec.Template.Labels[batchv1.ControllerUidLabel] = string(job.UID)
	job.Spec.Template.Labels[batchv1.JobNameLabel] = job.Name

	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d).Truncate(time.Second)) }
	job.Status = batchv1.JobStatus{
		StartTime:        ptr.To(at(-9 * time.Minute)),
		CompletionTime:   ptr.To(at(-time.Minute)),
		Active:           1,
		Ready:            ptr.To[int32](1),
		Terminating:      ptr.To[int32](1),
		Succeeded:        1,
		Failed:           1,
		CompletedIndexes: "0",
		FailedIndexes:    ptr.To("1"),
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{
			Succeeded: []types.UID{"p1"}, Failed: []types.UID{"p2"},
		},
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, Reason: "JobResumed", LastTransitionTime: at(-8 * time.Minute)},
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy,
				Message: "Container task for pod x failed with exit code 2 matching FailJob rule at index 1", LastTransitionTime: at(-2 * time.Minute)},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy,
				Message:       "Container task for pod x failed with exit code 2 matching FailJob rule at index 1",
				LastProbeTime: at(-2 * time.Minute), LastTransitionTime: at(-2 * time.Minute)},
		},
	}
	return task, job
}

// TestJobCacheTransform checks the Job cache transform on a Job built by
// internal/jobs.Build: it keeps exactly what the reconciler reads from a
// cached Job (its view of the attempt is unchanged), drops the rest, never
// changes its argument, and passes tombstones and other objects through.
func TestJobCacheTransform(t *testing.T) {
	transform := jobTransform(t)
	now := time.Now()
	task, job := fullJob(now)
	orig := job.DeepCopy()

	out, err := transform(job)
	must(t, err)
	if !equality.Semantic.DeepEqual(job, orig) {
		t.Fatal("the transform changed its argument")
	}
	got, ok := out.(*batchv1.Job)
	if !ok {
		t.Fatalf("the transform returned %T, want *batchv1.Job", out)
	}
	if got == job {
		t.Fatal("the transform returned its argument; it must return a new object")
	}

	// What remains: metadata without managed fields, spec.completions, and
	// the status fields runs.AttemptOf and runs.HoldsPlace read.
	wantMeta := *orig.ObjectMeta.DeepCopy()
	wantMeta.ManagedFields = nil
	delete(wantMeta.Annotations, "example.com/big-note")
	if !equality.Semantic.DeepEqual(got.ObjectMeta, wantMeta) {
		t.Errorf("metadata:\n got %+v\nwant %+v", got.ObjectMeta, wantMeta)
	}
	if want := (batchv1.JobSpec{Completions: ptr.To[int32](3), Suspend: ptr.To(false), ManagedBy: ptr.To(v1alpha1.MultiKueueManagedBy)}); !equality.Semantic.DeepEqual(got.Spec, want) {
		t.Errorf("spec = %+v, want only completions 3 (no template, podFailurePolicy, selector, ...)", got.Spec)
	}
	wantStatus := batchv1.JobStatus{
		StartTime:      orig.Status.StartTime,
		CompletionTime: orig.Status.CompletionTime,
		Ready:          ptr.To[int32](1),
		Succeeded:      1,
		Failed:         1,
		Active:         orig.Status.Active,                                // a stopped attempt's place is held
		Terminating:    orig.Status.Terminating,                           // until its pods are gone (runs.HoldsPlace)
		Conditions:     []batchv1.JobCondition{orig.Status.Conditions[2]}, // Failed only
	}
	if !equality.Semantic.DeepEqual(got.Status, wantStatus) {
		t.Errorf("status:\n got %+v\nwant %+v", got.Status, wantStatus)
	}

	// The reconciler's view of the trimmed Job is the full Job's: the index,
	// the runs and each attempt (phase, reason, message, times, generation,
	// run-now token, pods started), over the states an attempt goes through.
	if a, b := index.JobControllerUID(got), index.JobControllerUID(orig); len(a) != 1 || a[0] != b[0] {
		t.Errorf("JobControllerUID = %v, want %v", a, b)
	}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d).Truncate(time.Second)) }
	states := map[string]func(*batchv1.Job){
		"failed": func(*batchv1.Job) {},
		"pending": func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Active: 3, Ready: ptr.To[int32](0), StartTime: ptr.To(at(-time.Minute))}
		},
		"running": func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Active: 3, Ready: ptr.To[int32](2), Succeeded: 1, StartTime: ptr.To(at(-time.Minute))}
		},
		"complete": func(j *batchv1.Job) {
			j.Status = batchv1.JobStatus{Succeeded: 3, Ready: ptr.To[int32](0), CompletedIndexes: "0-2",
				StartTime: ptr.To(at(-time.Minute)), CompletionTime: ptr.To(at(-time.Second)),
				Conditions: []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: at(-2 * time.Second)},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: at(-time.Second)},
				}}
		},
		"deadline": func(j *batchv1.Job) {
			j.Status.Conditions[1].Reason, j.Status.Conditions[2].Reason = batchv1.JobReasonDeadlineExceeded, batchv1.JobReasonDeadlineExceeded
		},
		"stopped": func(j *batchv1.Job) {
			j.Annotations[v1alpha1.AnnotationStopReason] = string(v1alpha1.AttemptStartTimeout)
			j.Annotations[v1alpha1.AnnotationStopTime] = now.UTC().Format(time.RFC3339)
			j.Annotations[v1alpha1.AnnotationStopMessage] = "pods did not start"
			j.Spec.Suspend = ptr.To(true)
			j.Status = batchv1.JobStatus{Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", LastTransitionTime: at(0)},
			}}
		},
	}
	for name, set := range states {
		t.Run(name, func(t *testing.T) {
			full := orig.DeepCopy()
			set(full)
			out, err := transform(full.DeepCopy())
			must(t, err)
			trimmed := out.(*batchv1.Job)
			if a, b := runs.AttemptOf(trimmed, 2), runs.AttemptOf(full, 2); !cmp.Equal(a, b) {
				t.Errorf("attempt of the cached Job (-full +cached):\n%s", cmp.Diff(b, a))
			}
			a, b := runs.FromJobs(task.UID, []batchv1.Job{*trimmed}), runs.FromJobs(task.UID, []batchv1.Job{*full})
			if !cmp.Equal(a, b) || len(a) != 1 {
				t.Errorf("runs of the cached Job (-full +cached):\n%s", cmp.Diff(b, a))
			}
			// Idempotent: a trimmed Job passes through unchanged.
			again, err := transform(trimmed)
			must(t, err)
			if !equality.Semantic.DeepEqual(again, trimmed) {
				t.Errorf("a second transform changed the Job:\n got %+v\nwant %+v", again, trimmed)
			}
		})
	}

	// Tombstones (client-go does not pass them, but the transform must not
	// choke on one) and anything that is not a Job pass through as they are.
	tomb := toolscache.DeletedFinalStateUnknown{Key: "cache-ns/x", Obj: orig.DeepCopy()}
	out, err = transform(tomb)
	must(t, err)
	if !equality.Semantic.DeepEqual(out, tomb) {
		t.Errorf("tombstone came out as %#v", out)
	}
	out, err = transform(task)
	if err != nil || out != any(task) {
		t.Errorf("a Task came out as %T (%v), want it unchanged", out, err)
	}
	var nilJob *batchv1.Job
	if out, err = transform(nilJob); err != nil || out != any(nilJob) {
		t.Errorf("a nil *Job came out as %#v (%v)", out, err)
	}
}

// TestJobCacheHoldsTrimmedJobs checks the real informer path: a Job the
// API server stores whole is trimmed in the operator's cache (another
// replica's cache with CacheOptions, as the operator runs it), and the
// reconciler reads the same attempt from it as from the API server.
func TestJobCacheHoldsTrimmedJobs(t *testing.T) {
	testutil.SkipWithoutShortcuts(t) // the trimmed cache is a shortcut
	ns := newNamespace(t)
	// Labelled manual, so the suite's operator leaves the Task alone and
	// only the Job below exists.
	task := newTask(ns, "cached", func(t *v1alpha1.Task) {
		t.Labels = map[string]string{manualLabel: "true"}
	})
	must(t, k8s.Create(ctx, task))
	job := jobs.Build(task, "0", 1, nil, nil, jobOpts)
	must(t, k8s.Create(ctx, job))
	must(t, testutil.CompleteJob(ctx, k8s, job, time.Now()))
	full := getJob(t, job)
	if len(full.Spec.Template.Spec.Containers) == 0 || len(full.Status.Conditions) != 2 || len(full.ManagedFields) == 0 {
		t.Fatalf("the stored Job is not whole: %+v", full)
	}

	cached := &batchv1.Job{}
	eventually(t, "the cache to see the completed Job", func() (bool, string) {
		if err := manualClient.Get(ctx, client.ObjectKeyFromObject(job), cached); err != nil {
			return false, err.Error()
		}
		return cached.ResourceVersion == full.ResourceVersion, fmt.Sprintf("resourceVersion %s, want %s", cached.ResourceVersion, full.ResourceVersion)
	})
	if !equality.Semantic.DeepEqual(cached.Spec, batchv1.JobSpec{Completions: full.Spec.Completions, Suspend: full.Spec.Suspend, ManagedBy: full.Spec.ManagedBy}) {
		t.Errorf("cached spec = %+v, want only completions, suspend and managedBy", cached.Spec)
	}
	if len(cached.ManagedFields) != 0 || len(cached.Status.Conditions) != 1 || cached.Status.CompletedIndexes != "" {
		t.Errorf("cached Job not trimmed: managedFields %d, status %+v", len(cached.ManagedFields), cached.Status)
	}
	if a, b := runs.AttemptOf(cached, 1), runs.AttemptOf(full, 1); !cmp.Equal(a, b) || a.Phase != runs.Succeeded {
		t.Errorf("attempt from the cache, %s (-full +cached):\n%s", a.Phase, cmp.Diff(b, a))
	}
	owned, err := manualReconciler(nil).Owners.OwnedBy(ctx, ns, string(task.UID))
	must(t, err)
	if len(owned) != 1 || owned[0].Name != job.Name {
		t.Errorf("reading the Task's Jobs by the owner index gave %d Job(s)", len(owned))
	}
}

// A Job no Task controls that carries the operator's label enters the
// cache (the label selects it) without its annotations: anyone who may
// create Jobs could otherwise fill the operator's memory with them.
func TestAForeignJobIsCachedWithoutAnnotations(t *testing.T) {
	_, job := fullJob(time.Now())
	job.OwnerReferences = nil
	got, err := jobTransform(t)(job.DeepCopy())
	must(t, err)
	if a := got.(*batchv1.Job).Annotations; len(a) != 0 {
		t.Fatalf("a foreign Job kept annotations %v", a)
	}
}
