package plan

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// WorkerNote is what to record on a remote attempt's Job about its worker
// cluster: the one it is on now ("" while Kueue looks for one) and the
// ones it was taken from.
type WorkerNote struct {
	Worker string
	Lost   []v1alpha1.LostWorker
	// Left is the worker it was just taken from, for the event; "" when
	// it only arrived on one.
	Left string
}

// noteWorkers is part of stage 3: a remote attempt's worker, as its
// Workload names it this pass (Input.Workers), is kept on its Job; when
// the attempt was on a worker and no longer is (its worker lost, or the
// attempt evicted there, and Kueue looking for another or dispatching it
// to one), that worker joins its lost workers, with the time. Nothing is
// written while the worker stays the same.
func (d *decision) noteWorkers() {
	for i := range d.rs {
		a := d.rs[i].Latest()
		seen, ok := d.in.Workers[a.JobName]
		if !ok || !a.Remote || a.Phase != runs.Active || seen == a.Worker {
			continue
		}
		note := WorkerNote{Worker: seen, Lost: a.LostWorkers}
		if a.Worker != "" {
			note.Left = a.Worker
			note.Lost = append(append([]v1alpha1.LostWorker(nil), a.LostWorkers...), v1alpha1.LostWorker{Cluster: a.Worker, Time: metav1.NewTime(d.now)})
		}
		if d.p.RecordWorker == nil {
			d.p.RecordWorker = map[string]WorkerNote{}
		}
		d.p.RecordWorker[a.JobName] = note
		a.Worker, a.LostWorkers = note.Worker, note.Lost
	}
}
