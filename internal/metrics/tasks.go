package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/scheduler"
)

// Per-Task gauges, labelled namespace and task, so a team can alert on its
// own Task. Each Task costs at most five series; they are set from the
// status every pass writes (ObserveTask) and removed with the Task
// (ForgetTask). A series whose value the Task does not have (no run ended
// yet, no success yet, a one-shot Task's next slot) is absent rather than
// zero, so `absent()` and `time() - x` alerts mean what they say.
var (
	TaskLastRunSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "task_last_run_success",
		Help: "1 if the Task's newest run that ended in success or failure succeeded, 0 if it failed.",
	}, taskLabels)
	TaskLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "task_last_success_timestamp_seconds",
		Help: "When a run of the Task last succeeded (Unix seconds).",
	}, taskLabels)
	TaskConsecutiveFailures = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "task_consecutive_failures",
		Help: "Runs of the Task that failed in a row since its last success or spec change (status.consecutiveFailures).",
	}, taskLabels)
	TaskNextSchedule = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "task_next_schedule_timestamp_seconds",
		Help: "The next slot of a cron Task that will start one (Unix seconds); absent while suspended.",
	}, taskLabels)
	TaskSchedulePeriod = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "task_schedule_period_seconds",
		Help: "Seconds between a cron Task's next slot and the one after it: what 'N periods without success' alerts compare with.",
	}, taskLabels)
)

var taskLabels = []string{"namespace", "task"}

func taskVecs() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{TaskLastRunSuccess, TaskLastSuccess, TaskConsecutiveFailures, TaskNextSchedule, TaskSchedulePeriod}
}

// ObserveTask sets the Task's gauges from its (written) status.
func ObserveTask(task *v1alpha1.Task) {
	l := prometheus.Labels{"namespace": task.Namespace, "task": task.Name}
	st := &task.Status
	TaskConsecutiveFailures.With(l).Set(float64(st.ConsecutiveFailures))
	set(TaskLastRunSuccess, l, lastRunSuccess(st))
	if t := st.LastSuccessfulTime; t != nil {
		TaskLastSuccess.With(l).Set(float64(t.Unix()))
	} else {
		TaskLastSuccess.Delete(l)
	}
	next, period := nextSlot(task)
	set(TaskNextSchedule, l, next)
	set(TaskSchedulePeriod, l, period)
}

// ForgetTask removes the gauges of a deleted Task.
func ForgetTask(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "task": name}
	for _, v := range taskVecs() {
		v.Delete(l)
	}
}

func set(v *prometheus.GaugeVec, l prometheus.Labels, value *float64) {
	if value == nil {
		v.Delete(l)
		return
	}
	v.With(l).Set(*value)
}

// lastRunSuccess is 1 or 0 for the newest run that succeeded or failed for
// good; a stopped or cancelled run says nothing of the work.
func lastRunSuccess(st *v1alpha1.TaskStatus) *float64 {
	for _, h := range st.History {
		switch h.Result {
		case v1alpha1.RunResultSucceeded:
			return ptr.To(1.0)
		case v1alpha1.RunResultFailed:
			return ptr.To(0.0)
		}
	}
	return nil
}

// nextSlot is a cron Task's next slot that will start a run and the
// period after it; nil for a one-shot Task and while no slot will start
// (suspended, or stopped by its failure streak).
func nextSlot(task *v1alpha1.Task) (next, period *float64) {
	spec, st := &task.Spec, &task.Status
	if spec.Schedule == nil || st.NextScheduleTime == nil || ptr.Deref(spec.Suspend, false) ||
		scheduler.TooManyFailures(spec, st.ConsecutiveFailures) {
		return nil, nil
	}
	next = ptr.To(float64(st.NextScheduleTime.Unix()))
	s, err := scheduler.Parse(*spec.Schedule, ptr.Deref(spec.TimeZone, ""))
	if err != nil {
		return next, nil
	}
	after := s.Next(st.NextScheduleTime.Time)
	return next, ptr.To(after.Sub(st.NextScheduleTime.Time).Seconds())
}
