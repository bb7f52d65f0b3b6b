package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
)

// A deleted attempt is never created again: its Job's name is its
// attempt's, and the Task's status records the attempt, so the pass after
// the delete counts it as failed (missing.go). But that pass is brought by
// the Job's delete event, and it reads the Task from a cache that can be
// behind the status write that recorded the attempt (another informer,
// seconds behind under load); from such a Task the attempt looks never
// started, and the pass would create its Job again. With the speed
// shortcuts the memory of this process's own status writes covers the
// common case; this covers it with or without them: the Job watch
// remembers each deleted Job of a Task, by name and owner, before it wakes
// the Task; a pass about to create a Job under a name this process saw
// deleted for the same Task within deletedJobMemory reads the Task from
// the API server once, and while that is newer than the pass's, waits a
// second for its cache instead (cacheBehindDelete).

// deletedJobMemory is how long a deleted Job's name is kept: far longer
// than a cache lags, short enough that the memory stays small.
const deletedJobMemory = 2 * time.Minute

// cacheCatchUp is how soon a pass that held back such a create looks
// again.
const cacheCatchUp = time.Second

// deletedJobs are the Task-controlled Jobs this process saw deleted
// recently, by name, with their owner.
type deletedJobs struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]deletedJob
}

type deletedJob struct {
	owner types.UID
	at    time.Time
}

// add remembers job as deleted at now, and forgets what is older than
// deletedJobMemory.
func (d *deletedJobs) add(job *batchv1.Job, now time.Time) {
	uids := index.JobControllerUID(job)
	if len(uids) == 0 {
		return // not a Task's
	}
	owner := types.UID(uids[0])
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobs == nil {
		d.jobs = map[types.NamespacedName]deletedJob{}
	}
	for k, v := range d.jobs {
		if now.Sub(v.at) > deletedJobMemory {
			delete(d.jobs, k)
		}
	}
	d.jobs[types.NamespacedName{Namespace: job.Namespace, Name: job.Name}] = deletedJob{owner: owner, at: now}
}

// recently reports whether the Job key of the Task with UID owner was
// seen deleted within deletedJobMemory before now.
func (d *deletedJobs) recently(key types.NamespacedName, owner types.UID, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.jobs[key]
	return ok && v.owner == owner && now.Sub(v.at) <= deletedJobMemory
}

// cacheBehindDelete reports whether the pass must not create job: this
// process saw it deleted moments ago, and the Task as the API server has
// it now is newer than the pass's (its status records the attempt, which
// the next pass, from the caught-up cache, counts as deleted). Then the
// pass looks again after cacheCatchUp. One read, only for a Job seen
// deleted; a Task the API server has as the pass does never recorded the
// attempt (its Job was deleted before its record was written), and the
// Job is created as it would be without this memory.
func (p *pass) cacheBehindDelete(ctx context.Context, job *batchv1.Job) (bool, error) {
	if !p.r.deleted.recently(types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, p.task.UID, p.now) {
		return false, nil
	}
	stored := &v1alpha1.Task{}
	if err := p.r.APIReader.Get(ctx, client.ObjectKeyFromObject(p.task), stored); err != nil {
		return false, fmt.Errorf("reading the Task before creating Job %s again: %w", job.Name, err)
	}
	if stored.ResourceVersion == p.task.ResourceVersion {
		return false, nil
	}
	log.FromContext(ctx).V(1).Info("not creating a Job this process just saw deleted: the cached Task is behind", "job", job.Name)
	p.plan.Wake = earliest(p.plan.Wake, p.now.Add(cacheCatchUp))
	return true, nil
}

// SawJobDeleted tells the reconciler a Job was deleted (the Job watch
// does, before it wakes the Job's Task).
func (r *TaskReconciler) SawJobDeleted(job *batchv1.Job) {
	r.deleted.add(job, r.Clock.Now())
}

// rememberDeletes is the Job watch's handler: next's, with each deleted
// Job remembered first, so the pass its delete brings knows of it.
type rememberDeletes struct {
	next handler.EventHandler
	r    *TaskReconciler
}

func (h rememberDeletes) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.next.Create(ctx, e, q)
}

func (h rememberDeletes) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.next.Update(ctx, e, q)
}

func (h rememberDeletes) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if job, ok := e.Object.(*batchv1.Job); ok {
		h.r.SawJobDeleted(job)
	}
	h.next.Delete(ctx, e, q)
}

func (h rememberDeletes) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.next.Generic(ctx, e, q)
}
