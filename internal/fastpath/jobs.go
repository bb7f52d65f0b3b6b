package fastpath

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// createdTTL bounds how long a created Job is remembered: the cache shows a
// new Job within milliseconds, so an entry older than this is stale.
const createdTTL = time.Minute

// createdJobs remembers the Jobs this process created until the cache shows
// them (Shortcuts.RememberCreated, Created, SeenJobs). A pass that runs right after the one that created a Job (say, for
// the Task update the finalizer patch caused) may not see the Job in the
// cache yet; without this it would try to create it again, which the API
// server refuses (AlreadyExists) at the cost of two requests. It is only a
// shortcut: after a restart the deterministic names still prevent a
// second Job. A nil *createdJobs remembers nothing (shortcuts off).
type createdJobs struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]stamped[*batchv1.Job]
}

func (r *createdJobs) add(job *batchv1.Job, now time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	remember(&r.jobs, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, job, now)
}

// get returns a Job created less than createdTTL ago, or nil.
func (r *createdJobs) get(key types.NamespacedName, now time.Time) *batchv1.Job {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.jobs[key]
	if !ok {
		return nil
	}
	if e.stale(now, createdTTL) {
		forget(&r.jobs, key)
		return nil
	}
	return e.v
}

// seen forgets Jobs the cache now shows.
func (r *createdJobs) seen(jobs []batchv1.Job) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.jobs) == 0 {
		return
	}
	for i := range jobs {
		if forget(&r.jobs, types.NamespacedName{Namespace: jobs[i].Namespace, Name: jobs[i].Name}); r.jobs == nil {
			return
		}
	}
}
