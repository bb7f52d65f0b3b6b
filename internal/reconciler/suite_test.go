package reconciler_test

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil/opsuite"
	"github.com/taskops/task-operator/internal/waitline"
)

// The suite (internal/testutil/opsuite) runs one real kube-apiserver +
// etcd and one manager whose reconcilers read a fake clock, so tests move
// time without waiting. The short names below are its state and helpers.
var (
	ctx          context.Context
	k8s          client.Client // direct to the API server, no cache
	restCfg      *rest.Config
	fakeClock    *clocktesting.FakeClock
	rec          *reconciler.TaskReconciler
	manualClient client.Client
	manualReader client.Reader
	manualLines  *waitline.Lines
	jobOpts      = opsuite.JobOpts
	podLogs      = opsuite.PodLogs
)

func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, func() {
		ctx, k8s, restCfg, fakeClock, rec = opsuite.Ctx, opsuite.K8s, opsuite.RestConfig, opsuite.Clock, opsuite.Tasks
		manualClient, manualReader, manualLines = opsuite.ManualClient, opsuite.ManualReader, opsuite.ManualLines
	}))
}

// manualLabel marks Tasks only hand-driven reconcilers handle.
const manualLabel = opsuite.ManualLabel

// The suite's helpers (opsuite says what each does).
var (
	manualReconciler = opsuite.ManualReconciler
	newNamespace     = opsuite.NewNamespace
	newTask          = opsuite.NewTask
	startTask        = opsuite.StartTask
	createTask       = opsuite.CreateTask
	createQueue      = opsuite.CreateQueue
	eventually       = opsuite.Eventually
	getTask          = opsuite.GetTask
	waitNextSchedule = opsuite.WaitNextSchedule
	waitTask         = opsuite.WaitTask
	statusSummary    = opsuite.StatusSummary
	phaseIs          = opsuite.PhaseIs
	jobsOf           = opsuite.JobsOf
	waitJobs         = opsuite.WaitJobs
	eventsOf         = opsuite.EventsOf
	jobOf            = opsuite.JobOf
	condition        = opsuite.Condition
	assertConditions = opsuite.AssertConditions
	poke             = opsuite.Poke
	setRunNow        = opsuite.SetRunNow
	setAnnotation    = opsuite.SetAnnotation
	reconcileOnce    = opsuite.ReconcileOnce
	must             = opsuite.Must
	getJob           = opsuite.GetJob
	assertKstatus    = opsuite.AssertKstatus
	watchClient      = opsuite.WatchClient
	getQueue         = opsuite.GetQueue
	queuedAs         = opsuite.QueuedAs
	completeTaskJob  = opsuite.CompleteTaskJob
	waitManualCache  = opsuite.WaitManualCache
	scheduledTask    = opsuite.ScheduledTask
	toSlot           = opsuite.ToSlot
	errString        = opsuite.ErrString
)

// edit is opsuite.Edit (generic, so not a value).
func edit[T client.Object](t *testing.T, obj T, change func(T)) T {
	t.Helper()
	return opsuite.Edit(t, obj, change)
}

// staleTask is opsuite.StaleTask.
type staleTask = opsuite.StaleTask

// newNamespaceNow is a new namespace with the fake clock set to the
// present: where a test's Tasks are scheduled, their slots start from now.
func newNamespaceNow(t *testing.T) string {
	t.Helper()
	fakeClock.SetTime(time.Now())
	return newNamespace(t)
}
