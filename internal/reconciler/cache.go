package reconciler

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
)

// CacheOptions keeps the manager's cache small: only the operator's own
// Jobs, trimmed to what the operator reads (trimJob), no managed fields, and
// no pods at all (they are read directly and rarely). Tasks are kept whole
// (minus managed fields): a pass reads their spec, metadata and status.
// Both share the strings that repeat from object to object (intern.go).
// Without shortcuts (--fast-path=false) Tasks and Jobs are cached whole, as
// they are.
func CacheOptions(noShortcuts bool) cache.Options {
	if noShortcuts {
		return cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&batchv1.Job{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})},
			},
		}
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// A Transform here replaces DefaultTransform for Jobs, so
			// trimJob drops the managed fields too.
			&batchv1.Job{}: {
				Label:     labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}),
				Transform: trimJob,
			},
			&v1alpha1.Task{}: {Transform: trimTask},
		},
	}
}

// trimJob is the cache transform of Jobs. The operator reads a cached Job
// only through listJobs (index.AddOwners' index) and then runs.FromJobs /
// runs.AttemptOf, deleteJobs, and the Owns(Job) event handler, so the cache
// keeps exactly what those read:
//
//   - metadata, whole except managedFields and the annotations the
//     operator does not read (ownAnnotations): name and namespace (the cache
//     key, Job names in the status, deleteJobs), uid (deleteJobs'
//     precondition), ownerReferences (JobControllerUID index, Owns' handler
//     mapping a Job to its Task, runs.FromJobs' controlledBy), labels (run
//     and attempt), annotations (generation, scheduled time, run-now token,
//     stop reason/time/message, cancel token, captured output,
//     Retry-After), creationTimestamp (an attempt's start),
//     resourceVersion and the rest for the informer and any generic code.
//     Small, and no finer cut is worth the risk.
//   - spec.completions: runs.AttemptOf compares ready+succeeded+failed
//     pods with it (PodsStarted, for the start timeout); spec.suspend: a
//     Job held suspended by someone else (Kueue) waits for capacity;
//     spec.managedBy: a Job another controller runs (MultiKueue, on a
//     worker cluster) has no pods here (runs.Attempt.Remote).
//   - status.ready, .succeeded, .failed: the same PodsStarted sum.
//   - status.active, .terminating: a queue counts a stopped attempt's
//     place as taken until its pods are gone (runs.HoldsPlace).
//   - status.conditions of type Complete and Failed (type, status, reason,
//     message, lastTransitionTime): the attempt's phase, its failure reason
//     and message, and when it finished; and FailureTarget until one of
//     those comes (an attempt whose Job is being failed, whose output the
//     operator captures then: see deadlineOutput in pods.go).
//   - status.completionTime: when a Complete attempt finished;
//     status.startTime: when a Job was resumed from suspension (Kueue
//     admitting it), where its start timeout begins.
//
// Everything else goes, mainly the pod template (the operator builds Jobs
// with internal/jobs.Build and never reads one back; a Job it must compare
// is read from the API server, see startAttempt), spec.podFailurePolicy,
// spec.selector, the other spec fields, and status.completedIndexes, .failedIndexes, .uncountedTerminatedPods
// and the other conditions (SuccessCriteriaMet, FailureTarget, Suspended).
// A Job read from the cache is therefore never complete: never write one
// back (Update) or compare its spec. Jobs read with the APIReader are whole.
//
// The transform never changes what its argument says: it returns a new Job
// that shares the argument's slices and pointers (client-go hands it the
// freshly decoded object, which nothing else holds and which is dropped
// after, so sharing is safe); the only writes through them swap a string
// for an equal shared one (internJob). That also makes it idempotent, as
// client-go asks, should an object already in the cache ever come through
// again. Anything that is not a *batchv1.Job (a
// cache.DeletedFinalStateUnknown tombstone, whose object was trimmed when it
// entered the cache; client-go does not pass tombstones anyway) is returned
// as it is.
func trimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok || job == nil {
		return obj, nil
	}
	out := &batchv1.Job{
		TypeMeta:   job.TypeMeta,
		ObjectMeta: job.ObjectMeta, // a copy of the struct: the argument keeps its managedFields
		// sameTrimmedJob (setup.go) compares exactly these three.
		Spec: batchv1.JobSpec{Completions: job.Spec.Completions, Suspend: job.Spec.Suspend, ManagedBy: job.Spec.ManagedBy},
		Status: batchv1.JobStatus{
			Conditions:     finishConditions(job.Status.Conditions),
			CompletionTime: job.Status.CompletionTime,
			StartTime:      job.Status.StartTime,
			Ready:          job.Status.Ready,
			Succeeded:      job.Status.Succeeded,
			Failed:         job.Status.Failed,
			Active:         job.Status.Active,
			Terminating:    job.Status.Terminating,
		},
	}
	out.ManagedFields = nil
	out.Annotations = ownAnnotations(job)
	internJob(out)
	return out, nil
}

// trimTask is the cache transform of Tasks: managed fields dropped (as the
// other objects' DefaultTransform does), and the strings that repeat from
// Task to Task shared (internTask). It changes its argument, the freshly
// decoded Task nothing else holds, as cache.TransformStripManagedFields
// does; doing it twice changes nothing.
func trimTask(obj any) (any, error) {
	task, ok := obj.(*v1alpha1.Task)
	if !ok || task == nil {
		return obj, nil
	}
	task.ManagedFields = nil
	internTask(task)
	return task, nil
}

// ownAnnotations are the annotations of job the operator reads: its own
// (batch.taskops.io/...), and none at all on a Job no Task controls (the
// cache selects Jobs by a label anyone may set). A Job may carry 256 KiB
// of annotations; the cache keeps only what the operator wrote. Returns
// the Job's own map when nothing is dropped.
func ownAnnotations(job *batchv1.Job) map[string]string {
	if !index.TaskControlled(job) {
		return nil
	}
	prefix := v1alpha1.GroupVersion.Group + "/"
	foreign := 0
	for k := range job.Annotations {
		if !strings.HasPrefix(k, prefix) {
			foreign++
		}
	}
	if foreign == 0 {
		return job.Annotations
	}
	out := make(map[string]string, len(job.Annotations)-foreign)
	for k, v := range job.Annotations {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// finishConditions are the Complete and Failed conditions of cs, and its
// FailureTarget while it has neither: the only ones runs.AttemptOf reads
// (so only a Job that is being failed keeps a third condition); cs itself
// when it has no others.
func finishConditions(cs []batchv1.JobCondition) []batchv1.JobCondition {
	finished := false
	for i := range cs {
		finished = finished || cs[i].Type == batchv1.JobComplete || cs[i].Type == batchv1.JobFailed
	}
	keep := func(c *batchv1.JobCondition) bool {
		return c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || (!finished && c.Type == batchv1.JobFailureTarget)
	}
	n := 0
	for i := range cs {
		if keep(&cs[i]) {
			n++
		}
	}
	if n == len(cs) {
		return cs
	}
	if n == 0 {
		return nil
	}
	out := make([]batchv1.JobCondition, 0, n)
	for i := range cs {
		if keep(&cs[i]) {
			out = append(out, cs[i])
		}
	}
	return out
}
