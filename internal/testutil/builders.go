package testutil

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// The project's one set of test builders, in the style of Kueue's
// pkg/util/testing: MakeX gives a valid object, each method changes one
// thing and returns the builder, Obj returns the object.

// TaskWrapper builds a Task.
type TaskWrapper struct{ v1alpha1.Task }

// MakeTask is a one-shot shell Task running `echo hello`.
func MakeTask(ns, name string) *TaskWrapper {
	return &TaskWrapper{v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "echo hello"},
	}}
}

// Obj returns the Task.
func (w *TaskWrapper) Obj() *v1alpha1.Task { return &w.Task }

// Shell sets the shell command. On a real node it is what runs, so a
// failure comes from the shell itself (`exit 3`, stderr, `sleep`).
func (w *TaskWrapper) Shell(cmd string) *TaskWrapper { w.Spec.Shell = cmd; return w }

// HTTP makes it an http Task calling url.
func (w *TaskWrapper) HTTP(url string) *TaskWrapper {
	w.Spec.Type, w.Spec.Shell, w.Spec.URL = v1alpha1.TaskTypeHTTP, "", url
	return w
}

// Image sets spec.image.
func (w *TaskWrapper) Image(image string) *TaskWrapper { w.Spec.Image = image; return w }

// MaxRetry sets maxRetry.
func (w *TaskWrapper) MaxRetry(n int32) *TaskWrapper { w.Spec.MaxRetry = n; return w }

// Retries sets maxRetry and the backoff.
func (w *TaskWrapper) Retries(maxRetry, initialSeconds, maxSeconds, factor int32) *TaskWrapper {
	w.Spec.MaxRetry = maxRetry
	w.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: initialSeconds, MaxSeconds: maxSeconds, Factor: factor}
	return w
}

// Replicas sets replicas.
func (w *TaskWrapper) Replicas(n int32) *TaskWrapper { w.Spec.Replicas = n; return w }

// StartTimeout sets startTimeoutSeconds.
func (w *TaskWrapper) StartTimeout(seconds int32) *TaskWrapper {
	w.Spec.StartTimeoutSeconds = ptr.To(seconds)
	return w
}

// ActiveDeadline sets the per-attempt deadline.
func (w *TaskWrapper) ActiveDeadline(seconds int64) *TaskWrapper {
	w.Spec.ActiveDeadlineSeconds = ptr.To(seconds)
	return w
}

// Schedule makes it a cron Task.
func (w *TaskWrapper) Schedule(expr string) *TaskWrapper { w.Spec.Schedule = ptr.To(expr); return w }

// StartingDeadline sets startingDeadlineSeconds.
func (w *TaskWrapper) StartingDeadline(seconds int64) *TaskWrapper {
	w.Spec.StartingDeadlineSeconds = ptr.To(seconds)
	return w
}

// Concurrency sets concurrencyPolicy.
func (w *TaskWrapper) Concurrency(p v1alpha1.ConcurrencyPolicy) *TaskWrapper {
	w.Spec.ConcurrencyPolicy = p
	return w
}

// Suspend sets spec.suspend.
func (w *TaskWrapper) Suspend(on bool) *TaskWrapper { w.Spec.Suspend = ptr.To(on); return w }

// TTL sets ttlSecondsAfterFinished.
func (w *TaskWrapper) TTL(seconds int32) *TaskWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// HistoryLimits sets successfulRunsHistoryLimit and failedRunsHistoryLimit.
func (w *TaskWrapper) HistoryLimits(succeeded, failed int32) *TaskWrapper {
	w.Spec.SuccessfulRunsHistoryLimit, w.Spec.FailedRunsHistoryLimit = ptr.To(succeeded), ptr.To(failed)
	return w
}

// Annotation sets an annotation on the Task.
func (w *TaskWrapper) Annotation(k, v string) *TaskWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Label sets a label on the Task.
func (w *TaskWrapper) Label(k, v string) *TaskWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// PodAnnotations sets spec.podMetadata.annotations from key, value pairs.
func (w *TaskWrapper) PodAnnotations(kv ...string) *TaskWrapper {
	if w.Spec.PodMetadata == nil {
		w.Spec.PodMetadata = &v1alpha1.PodMetadata{}
	}
	if w.Spec.PodMetadata.Annotations == nil {
		w.Spec.PodMetadata.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		w.Spec.PodMetadata.Annotations[kv[i]] = kv[i+1]
	}
	return w
}

// UID sets the UID (for pure tests; the API server sets it otherwise).
func (w *TaskWrapper) UID(uid string) *TaskWrapper { w.Task.UID = types.UID(uid); return w }

// Generation sets the generation (for pure tests).
func (w *TaskWrapper) Generation(g int64) *TaskWrapper { w.Task.Generation = g; return w }

// Status sets the stored status (for pure tests).
func (w *TaskWrapper) Status(st v1alpha1.TaskStatus) *TaskWrapper { w.Task.Status = st; return w }

// With applies a change no method names.
func (w *TaskWrapper) With(change func(*v1alpha1.Task)) *TaskWrapper { change(&w.Task); return w }

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

// Output sets what the operator kept of the last attempt's output.
func (w *RunWrapper) Output(out string) *RunWrapper {
	w.Latest().Output = out
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
