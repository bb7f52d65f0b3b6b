package reconciler

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/workers"
)

// MultiKueue, when a Task's Jobs are dispatched to worker clusters
// (runs.Attempt.Remote: spec.managedBy names Kueue's MultiKueue): Kueue
// copies each Job to a worker and mirrors the worker's Job status back
// into it, so the Job's conditions and counts are the attempt's, but its
// pods, their logs and exit codes are on the worker. The operator reads
// which worker from the Job's Workload (status.clusterName) and says so,
// instead of reading pods that are not here. docs/multicluster.md.

// workerOf is the worker cluster Kueue dispatched a Job to: its Workload's
// status.clusterName, "" while none is chosen (or the Workload is gone).
func (p *pass) workerOf(ctx context.Context, jobName string) (string, error) {
	name, _, err := p.workerOfWorkload(ctx, jobName)
	return name, err
}

// workerOfWorkload is workerOf, and whether there is a Workload to say.
func (p *pass) workerOfWorkload(ctx context.Context, jobName string) (name string, found bool, err error) {
	wl, err := p.workloadOf(ctx, jobName)
	if err != nil || wl == nil {
		return "", false, err
	}
	name, _, _ = unstructured.NestedString(wl.Object, "status", "clusterName")
	return name, true, nil
}

// WorkerPods reads the pods of remote attempts on the worker clusters
// (internal/workers.Readers).
type WorkerPods interface {
	// Follow watches the Task pods of namespace ns on the workers from
	// now on; called on each pass of a Task with a remote attempt, and
	// cheap when nothing changed.
	Follow(ctx context.Context, ns string) error
	// Ended are the ended pods of the attempt whose Job is jobName, as
	// the worker last showed them, or why none can be known.
	Ended(cluster, ns, jobName string) ([]corev1.Pod, error)
}

// remotePods is what the start check of a remote attempt needs: the pod
// counts the worker mirrored into its Job, and the worker's name.
func (p *pass) remotePods(ctx context.Context, jobs []batchv1.Job, name string) (retry.RemotePods, error) {
	cluster, err := p.workerOf(ctx, name)
	pods := retry.RemotePods{Cluster: cluster}
	for i := range jobs {
		if jobs[i].Name == name {
			pods.Active, pods.Ready = jobs[i].Status.Active, ptr.Deref(jobs[i].Status.Ready, 0)
		}
	}
	return pods, err
}

// followWorkers has the Task's pods followed on the workers while it has a
// remote attempt, so their output is known when the attempt ends (Kueue
// deletes them then). Best effort: without it the output stays on the
// worker, which the record then says.
func (p *pass) followWorkers(ctx context.Context) {
	if p.r.Workers == nil {
		return
	}
	if err := p.r.Workers.Follow(ctx, p.task.Namespace); err != nil {
		log.FromContext(ctx).Info("cannot follow the Task's pods on the worker clusters", "error", err.Error())
	}
}

// remoteOutput is what the status says of a finished remote attempt: what
// its pods said, as for a local attempt, when the operator saw them end on
// the worker (WorkerPods); otherwise where they ran and how to read their
// output there, and why it is not here. Never "no output": the output
// exists, on the worker.
func (p *pass) remoteOutput(ctx context.Context, a *runs.Attempt) (status.Output, error) {
	cluster, err := p.workerOf(ctx, a.JobName)
	if err != nil {
		return status.Output{}, err
	}
	where := "a worker cluster (not named by its Workload)"
	logs := fmt.Sprintf("kubectl -n %s logs job/%s", p.task.Namespace, a.JobName)
	if cluster == "" {
		return status.Output{Text: joinText(a.Message, fmt.Sprintf("ran on %s; its output is there: %s", where, logs))}, nil
	}
	where = "worker cluster " + cluster
	var why error = workers.ErrNoKubeconfig
	if p.r.Workers != nil {
		var pods []corev1.Pod
		if pods, why = p.r.Workers.Ended(cluster, p.task.Namespace, a.JobName); len(pods) > 0 {
			out := podOutput(pods)
			out.Text, out.Cluster = joinText(out.Text, "ran on "+where), cluster
			return out, nil
		}
	}
	logs = fmt.Sprintf("kubectl --context %s -n %s logs job/%s", cluster, p.task.Namespace, a.JobName)
	text := joinText(a.Message, fmt.Sprintf("ran on %s; its output is there: %s", where, logs))
	switch {
	case errors.Is(why, workers.ErrNoKubeconfig):
		// How to have it here instead (docs/multicluster.md).
		text += fmt.Sprintf(" (for it here: a read-only kubeconfig Secret labelled %s=%s)", v1alpha1.LabelWorkerCluster, cluster)
	case apierrors.IsForbidden(why):
		text += " (the worker does not let the operator read pods in this namespace: docs/multicluster.md)"
	case why != nil:
		text += " (reading it there failed: " + status.Tail(why.Error(), 120) + ")"
	}
	return status.Output{Text: text, Cluster: cluster}, nil
}

// joinText is a and b joined by "; ", either of them possibly empty.
func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// observeWorker reads which worker the Workload of active remote attempt a
// names now, for the plan to keep on its Job (plan.WorkerNote): nothing
// when the Workload is not there.
func (p *pass) observeWorker(ctx context.Context, in *plan.Input, a *runs.Attempt) error {
	name, found, err := p.workerOfWorkload(ctx, a.JobName)
	if found {
		in.Workers = setKey(in.Workers, a.JobName, name)
	}
	return err
}

func (p *pass) recordWorkers(ctx context.Context) error {
	return eachJob(p.plan.RecordWorker, "recording the worker cluster on", func(name string, note plan.WorkerNote) error {
		return p.recordWorker(ctx, name, note)
	})
}

// recordWorker keeps on a remote attempt's Job the worker it is on and
// those it was taken from; a worker left is also a Warning event.
func (p *pass) recordWorker(ctx context.Context, jobName string, note plan.WorkerNote) error {
	annotations := map[string]any{v1alpha1.AnnotationWorker: nil}
	if note.Worker != "" {
		annotations[v1alpha1.AnnotationWorker] = note.Worker
	}
	if len(note.Lost) > 0 {
		annotations[v1alpha1.AnnotationLostWorkers] = runs.EncodeLostWorkers(note.Lost)
	}
	job := p.jobRef(jobName)
	if found, err := p.patchJob(ctx, job, map[string]any{"metadata": map[string]any{"annotations": annotations}}); !found || err != nil {
		return err
	}
	if a := runs.FindAttempt(p.runs, jobName); a != nil {
		a.Worker, a.LostWorkers = note.Worker, note.Lost
	}
	if note.Left != "" {
		p.r.event(p.task, job, eventWarning, v1alpha1.EventWorkerLost, "Redispatch",
			fmt.Sprintf("attempt Job %s was taken from worker cluster %s; Kueue dispatches it again", jobName, note.Left))
	}
	return nil
}
