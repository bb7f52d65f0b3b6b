package testutil

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// The project's one set of test builders. A Task is built from options,
// so a table of cases can hold the options of each case (the namespace is
// only known when the test runs): NewTask gives a valid one-shot shell
// Task, each option changes one thing. A run is built in the style of
// Kueue's pkg/util/testing, MakeRun(...).Succeeded(...).Obj(), its attempts
// in the order they were made.

// TaskOpt changes a Task under construction.
type TaskOpt func(*v1alpha1.Task)

// NewTask is a one-shot shell Task running `echo hello`, changed by opts.
func NewTask(ns, name string, opts ...TaskOpt) *v1alpha1.Task {
	t := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "echo hello"},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Shell sets the shell command. On a real node it is what runs, so a
// failure comes from the shell itself (`exit 3`, stderr, `sleep`).
func Shell(cmd string) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Shell = cmd } }

// HTTP makes it an http Task calling url.
func HTTP(url string) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.Type, t.Spec.Shell, t.Spec.URL = v1alpha1.TaskTypeHTTP, "", url }
}

// Image sets spec.image.
func Image(image string) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Image = image } }

// MaxRetry sets maxRetry.
func MaxRetry(n int32) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.MaxRetry = n } }

// Retries sets maxRetry and the backoff.
func Retries(maxRetry, initialSeconds, maxSeconds, factor int32) TaskOpt {
	return func(t *v1alpha1.Task) {
		t.Spec.MaxRetry = maxRetry
		t.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: initialSeconds, MaxSeconds: maxSeconds, Factor: factor}
	}
}

// Replicas sets replicas.
func Replicas(n int32) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Replicas = n } }

// StartTimeout sets startTimeoutSeconds.
func StartTimeout(seconds int32) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.StartTimeoutSeconds = ptr.To(seconds) }
}

// ActiveDeadline sets the per-attempt deadline.
func ActiveDeadline(seconds int64) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.ActiveDeadlineSeconds = ptr.To(seconds) }
}

// CapacityTimeout sets capacityTimeoutSeconds.
func CapacityTimeout(seconds int32) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.CapacityTimeoutSeconds = ptr.To(seconds) }
}

// Requests adds resource requests, name and quantity in turn
// (Requests("cpu", "1", "memory", "16Mi")).
func Requests(nameQuantity ...string) TaskOpt {
	return addQuantities(func(r *v1alpha1.Resources) *corev1.ResourceList { return &r.Requests }, nameQuantity)
}

// Limits adds resource limits, name and quantity in turn.
func Limits(nameQuantity ...string) TaskOpt {
	return addQuantities(func(r *v1alpha1.Resources) *corev1.ResourceList { return &r.Limits }, nameQuantity)
}

// addQuantities adds the quantities to the list of spec.resources that
// list picks.
func addQuantities(list func(*v1alpha1.Resources) *corev1.ResourceList, nameQuantity []string) TaskOpt {
	return func(t *v1alpha1.Task) {
		if t.Spec.Resources == nil {
			t.Spec.Resources = &v1alpha1.Resources{}
		}
		l := list(t.Spec.Resources)
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		for i := 0; i+1 < len(nameQuantity); i += 2 {
			(*l)[corev1.ResourceName(nameQuantity[i])] = resource.MustParse(nameQuantity[i+1])
		}
	}
}

// Schedule makes it a cron Task.
func Schedule(expr string) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To(expr) } }

// StartingDeadline sets startingDeadlineSeconds.
func StartingDeadline(seconds int64) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.StartingDeadlineSeconds = ptr.To(seconds) }
}

// Concurrency sets concurrencyPolicy.
func Concurrency(p v1alpha1.ConcurrencyPolicy) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.ConcurrencyPolicy = p }
}

// Suspend sets spec.suspend.
func Suspend(on bool) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Suspend = ptr.To(on) } }

// TTL sets ttlSecondsAfterFinished.
func TTL(seconds int32) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.TTLSecondsAfterFinished = ptr.To(seconds) }
}

// HistoryLimits sets successfulRunsHistoryLimit and failedRunsHistoryLimit.
func HistoryLimits(succeeded, failed int32) TaskOpt {
	return func(t *v1alpha1.Task) {
		t.Spec.SuccessfulRunsHistoryLimit, t.Spec.FailedRunsHistoryLimit = ptr.To(succeeded), ptr.To(failed)
	}
}

// Annotation sets an annotation on the Task.
func Annotation(k, v string) TaskOpt {
	return func(t *v1alpha1.Task) {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = v
	}
}

// Label sets a label on the Task.
func Label(k, v string) TaskOpt {
	return func(t *v1alpha1.Task) {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[k] = v
	}
}

// PodAnnotations sets spec.podMetadata.annotations from key, value pairs.
func PodAnnotations(kv ...string) TaskOpt {
	return func(t *v1alpha1.Task) {
		if t.Spec.PodMetadata == nil {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{}
		}
		if t.Spec.PodMetadata.Annotations == nil {
			t.Spec.PodMetadata.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Spec.PodMetadata.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// UID sets the UID (for pure tests; the API server sets it otherwise).
func UID(uid string) TaskOpt { return func(t *v1alpha1.Task) { t.UID = types.UID(uid) } }

// Generation sets the generation (for pure tests).
func Generation(g int64) TaskOpt { return func(t *v1alpha1.Task) { t.Generation = g } }

// Queue names the Task's TaskQueue (spec.queueName).
func Queue(name string) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.QueueName = name } }

// Priority sets spec.priority.
func Priority(p int32) TaskOpt { return func(t *v1alpha1.Task) { t.Spec.Priority = p } }

// NewTaskQueue is a TaskQueue admitting maxRunning attempts at a time.
func NewTaskQueue(ns, name string, maxRunning int32) *v1alpha1.TaskQueue {
	return &v1alpha1.TaskQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.TaskQueueSpec{MaxRunning: maxRunning},
	}
}

// Status sets the stored status (for pure tests).
func Status(st v1alpha1.TaskStatus) TaskOpt { return func(t *v1alpha1.Task) { t.Status = st } }

// RunWrapper builds a run, as internal/runs reads it from Jobs.
type RunWrapper struct{ runs.Run }

// MakeRun is a run with no attempt yet.
func MakeRun(id string) *RunWrapper { return &RunWrapper{runs.Run{ID: id}} }

// Obj returns the run.
func (w *RunWrapper) Obj() runs.Run { return w.Run }

// Scheduled sets the cron slot of the run.
func (w *RunWrapper) Scheduled(slot time.Time) *RunWrapper { w.Run.Scheduled = &slot; return w }

// Active adds an attempt whose Job was created at created and runs.
func (w *RunWrapper) Active(created time.Time) *RunWrapper {
	return w.attempt(runs.Attempt{Phase: runs.Active, Created: created})
}

// Started adds a running attempt whose pods have all started.
func (w *RunWrapper) Started(created time.Time) *RunWrapper {
	return w.attempt(runs.Attempt{Phase: runs.Active, Created: created, PodsStarted: true})
}

// Succeeded adds an attempt that succeeded at finished.
func (w *RunWrapper) Succeeded(created, finished time.Time) *RunWrapper {
	return w.attempt(runs.Attempt{Phase: runs.Succeeded, Created: created, Finished: finished, PodsStarted: true})
}

// Failed adds an attempt that failed at finished for reason.
func (w *RunWrapper) Failed(created, finished time.Time, reason v1alpha1.Reason, message string) *RunWrapper {
	return w.attempt(runs.Attempt{Phase: runs.Failed, Created: created, Finished: finished, Reason: reason, Message: message, PodsStarted: true})
}

// Stopped adds an attempt the operator stopped at finished for reason.
func (w *RunWrapper) Stopped(created, finished time.Time, reason v1alpha1.Reason, message string) *RunWrapper {
	return w.attempt(runs.Attempt{Phase: runs.Stopped, Created: created, Finished: finished, Reason: reason, Message: message})
}

// Params sets the values the last attempt's Job records for its run.
func (w *RunWrapper) Params(values map[string]string) *RunWrapper {
	w.Latest().Params = values
	return w
}

// Trigger sets the upstream runs the last attempt's Job records as its
// run's trigger (spec.after).
func (w *RunWrapper) Trigger(refs ...v1alpha1.TriggerRef) *RunWrapper {
	w.Latest().Trigger = refs
	return w
}

// Output sets what the operator kept of the last attempt's output.
func (w *RunWrapper) Output(out string) *RunWrapper {
	w.Latest().Output = out
	return w
}

// Token records on every attempt of the run the run-now token that
// started it, as its Jobs do.
func (w *RunWrapper) Token(token string) *RunWrapper {
	for i := range w.Attempts {
		w.Attempts[i].RunNowTokenValue = token
	}
	return w
}

// StopUndone marks the last attempt, which runs, as carrying the
// operator's stop annotation for reason: its Job was resumed after a stop,
// or annotated by hand.
func (w *RunWrapper) StopUndone(reason v1alpha1.Reason, message string) *RunWrapper {
	w.Latest().StopUndone, w.Latest().StopUndoneMessage = reason, message
	return w
}

// Failing marks the last attempt as being failed by the Job controller
// for reason (its FailureTarget condition).
func (w *RunWrapper) Failing(reason v1alpha1.Reason) *RunWrapper {
	w.Latest().Failing = reason
	return w
}

// attempt adds the next attempt, named as the run's Job would be for a
// Task named "t": t-<run>-<n>.
func (w *RunWrapper) attempt(a runs.Attempt) *RunWrapper {
	a.Number = int32(len(w.Attempts) + 1)
	a.JobName = AttemptJobName(w.ID, a.Number)
	w.Attempts = append(w.Attempts, a)
	return w
}

// AttemptJobName is the Job name MakeRun gives attempt n of run id.
func AttemptJobName(runID string, n int32) string {
	return "t-" + runID + "-" + strconv.Itoa(int(n))
}

// Kstatus is the kstatus verdict (cli-utils, as Flux and kpt compute it)
// of a Task, and its message.
func Kstatus(task *v1alpha1.Task) (kstatus.Status, string, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		return "", "", err
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return "", "", err
	}
	return res.Status, res.Message, nil
}

// Notify adds a spec.notify entry to url for the outcomes on.
func Notify(url string, format v1alpha1.NotifyFormat, on ...v1alpha1.NotifyOn) TaskOpt {
	return func(t *v1alpha1.Task) {
		t.Spec.Notify = append(t.Spec.Notify, v1alpha1.Notification{URL: url, Format: format, On: on})
	}
}

// SuspendAfterFailures sets spec.suspendAfterFailures.
func SuspendAfterFailures(n int32) TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.SuspendAfterFailures = ptr.To(n) }
}
