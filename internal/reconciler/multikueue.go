package reconciler

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
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
	wl, err := p.workloadOf(ctx, jobName)
	if err != nil || wl == nil {
		return "", err
	}
	name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	return name, nil
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

// remoteOutput is what the status says of a finished remote attempt in
// place of its pods' output: where they ran and how to read it there.
// Never "no output": the output exists, on the worker.
func (p *pass) remoteOutput(ctx context.Context, a *runs.Attempt) (status.Output, error) {
	cluster, err := p.workerOf(ctx, a.JobName)
	if err != nil {
		return status.Output{}, err
	}
	where := "a worker cluster (not named by its Workload)"
	logs := fmt.Sprintf("kubectl -n %s logs job/%s", p.task.Namespace, a.JobName)
	if cluster != "" {
		where = "worker cluster " + cluster
		logs = fmt.Sprintf("kubectl --context %s -n %s logs job/%s", cluster, p.task.Namespace, a.JobName)
	}
	text := fmt.Sprintf("ran on %s; its output is there: %s", where, logs)
	if a.Message != "" {
		text = a.Message + "; " + text
	}
	return status.Output{Text: text, Cluster: cluster}, nil
}
