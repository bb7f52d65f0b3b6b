// Package index holds the cache's field indexes both controllers read
// by, and the index functions: a Task's Jobs by their controller, a
// queue's Tasks and the Jobs holding its places, the Tasks waiting for a
// Job name, the Tasks naming a TaskCalendar, and the Tasks that run
// after a Task (spec.after). Add registers
// them all before the manager starts, and AddOwners the Jobs' owner
// index on the Job informer itself (owners.go: a pass reads its Task's
// Jobs without copying its neighbours').
//
// The queue's places index keeps a queue pass flat: it reads the Jobs
// running, never the queue's finished history; the attempts waiting come
// from the line kept in memory (internal/waitline), read from its head.
package index

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

const (
	// OwnedJobs indexes Jobs by a bucket of the UID of the Task that
	// controls them (OwnerBucket); OwnedBy lists one Task's Jobs by it
	// where the Job informer's own index cannot be read (AddOwners).
	OwnedJobs = ".metadata.controllerUID.bucket"
	// TaskQueue indexes Tasks by spec.queueName.
	TaskQueue = ".spec.queueName"
	// QueuedJob indexes Tasks by the Job names they wait to have admitted
	// (status.queued), so an admission wakes exactly their Tasks.
	QueuedJob = ".status.queued.jobName"
	// QueuePlaces indexes the Jobs that hold a place in a queue (its
	// label) by the queue: controlled by a Task and not finished
	// (runs.HoldsPlace). A finished Job leaves the index.
	QueuePlaces = ".metadata.labels.queue.holding"
	// SkipCalendars indexes Tasks by the TaskCalendars spec.skipCalendars
	// names, so an edited calendar wakes exactly its Tasks.
	SkipCalendars = ".spec.skipCalendars"
	// After indexes Tasks by the upstream Tasks spec.after names, so a
	// finished upstream run wakes exactly the Tasks that run after it.
	After = ".spec.after.task"
)

// Add registers every field index but the Jobs' owners (AddOwners, which
// needs the cache itself).
func Add(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, TaskQueue, func(o client.Object) []string {
		if q := o.(*v1alpha1.Task).Spec.QueueName; q != "" {
			return []string{q}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, SkipCalendars, func(o client.Object) []string {
		return o.(*v1alpha1.Task).Spec.SkipCalendars
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, After, func(o client.Object) []string {
		var out []string
		for _, a := range o.(*v1alpha1.Task).Spec.After {
			out = append(out, a.Task)
		}
		return out
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, QueuedJob, func(o client.Object) []string {
		return QueuedJobNames(o.(*v1alpha1.Task).Status.Queued)
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &batchv1.Job{}, QueuePlaces, JobHoldingPlaceIn)
}

// JobHoldingPlaceIn is the index function of QueuePlaces: the Job's queue
// while it holds a place there.
func JobHoldingPlaceIn(obj client.Object) []string {
	job := obj.(*batchv1.Job)
	if q := job.Labels[v1alpha1.LabelQueue]; q != "" && TaskControlled(job) && runs.HoldsPlace(job) {
		return []string{q}
	}
	return nil
}

// JobOwnerBucket is the index function of OwnedJobs: the bucket of the UID
// of the Task that controls the Job, if one does.
func JobOwnerBucket(obj client.Object) []string {
	if uid := JobControllerUID(obj); len(uid) == 1 {
		return []string{OwnerBucket(uid[0])}
	}
	return nil
}

// OwnerBucket is the OwnedJobs bucket of a Task's UID: its first two
// characters (256 buckets of hex). A field index keeps a set of its own
// for every value it holds, twice (per namespace and cluster-wide), and
// indexed by the whole UID almost every Job had two sets to itself: most
// of what the index cost per Task (docs/performance-history.md, "The
// Jobs' owner index by bucket"). Buckets share the sets; a read takes a
// bucket, a few Jobs in a namespace of thousands, and keeps the Task's.
func OwnerBucket(uid string) string {
	return uid[:min(2, len(uid))]
}

// OwnedBy returns the Jobs of namespace ns that the Task with UID uid
// controls, listed from c by OwnedJobs. The list skips the deep copy but
// still copies each of the bucket's Jobs into its items; only the Task's
// own are copied again for the caller.
func OwnedBy(ctx context.Context, c client.Reader, ns, uid string) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{OwnedJobs: OwnerBucket(uid)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for i := range list.Items {
		out = ownJobs(out, uid, &list.Items[i])
	}
	return out, nil
}

// JobControllerUID is the UID of the Task that controls the Job, if one
// does.
func JobControllerUID(obj client.Object) []string {
	if uid, ok := controllerUID(obj.(*batchv1.Job)); ok {
		return []string{uid}
	}
	return nil
}

// controllerUID is JobControllerUID without the slice an index function
// returns: the owner readers call it for every Job of a bucket.
func controllerUID(job *batchv1.Job) (string, bool) {
	for _, ref := range job.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "Task" && ref.APIVersion == v1alpha1.GroupVersion.String() {
			return string(ref.UID), true
		}
	}
	return "", false
}

// ownJobs appends to out a copy of each Job that the Task with UID uid
// controls: what both owner readers keep of a bucket.
func ownJobs(out []batchv1.Job, uid string, jobs ...*batchv1.Job) []batchv1.Job {
	for _, job := range jobs {
		if owner, ok := controllerUID(job); ok && owner == uid {
			out = append(out, *job.DeepCopy())
		}
	}
	return out
}

// TaskControlled reports whether a Task controls job, as OwnedJobs reads
// it: only those count in a queue. The queue label is one anyone who may
// create Jobs can set, and a foreign Job carrying it must not take a place.
func TaskControlled(job *batchv1.Job) bool { return len(JobControllerUID(job)) > 0 }

// QueuedJobNames are the Job names of a Task's status.queued, sorted.
func QueuedJobNames(queued []v1alpha1.QueuedAttempt) []string {
	out := make([]string, 0, len(queued))
	for _, q := range queued {
		out = append(out, q.JobName)
	}
	slices.Sort(out)
	return out
}
