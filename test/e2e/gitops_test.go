//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/gitops"
)

// Argo CD's view of Tasks and TaskQueues: the shipped health checks
// (config/argocd, docs/gitops.md) run in gopher-lua, the engine Argo CD
// embeds, against the objects the operator wrote on the real node, in
// every state an Application can meet them in.
func TestArgoCDHealthOfTasksAndQueuesInEveryState(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-gitops")
	create(t, testutil.NewTaskQueue(ns, "one", 1))
	suspendedQueue := testutil.NewTaskQueue(ns, "paused", 1)
	suspendedQueue.Spec.Suspend = ptrTo(true)
	create(t, suspendedQueue)
	create(t, testutil.NewTask(ns, "succeeded", testutil.Shell("echo done")))
	create(t, testutil.NewTask(ns, "failed", testutil.Shell("exit 3")))
	create(t, testutil.NewTask(ns, "retrying", testutil.Shell("exit 3"), testutil.Retries(1, 300, 300, 2)))
	create(t, testutil.NewTask(ns, "holder", testutil.Shell("sleep 300"), testutil.Queue("one")))
	// "queued" joins the line only once "holder" holds the queue's one
	// place: created together, either could be admitted first (same
	// priority), and a "queued" that ran first would be Healthy.
	waitPhase(t, ns, "holder", v1alpha1.PhaseRunning, 60*time.Second)
	create(t, testutil.NewTask(ns, "queued", testutil.Shell("echo my turn"), testutil.Queue("one")))
	create(t, testutil.NewTask(ns, "suspended", testutil.Shell("echo never"), testutil.Schedule("0 3 * * *"), testutil.Suspend(true)))
	create(t, testutil.NewTask(ns, "cron-failing", testutil.Shell("exit 3"), testutil.Schedule("@every 10s")))
	create(t, testutil.NewTask(ns, "cron-ok", testutil.Shell("echo tick"), testutil.Schedule("@every 10s")))

	want := []struct {
		kind, name, health string
	}{
		{"Task", "succeeded", "Healthy"},
		{"Task", "failed", "Degraded"},
		{"Task", "retrying", "Progressing"},
		{"Task", "holder", "Progressing"},
		{"Task", "queued", "Progressing"},
		{"Task", "suspended", "Suspended"},
		{"Task", "cron-failing", "Degraded"},
		{"Task", "cron-ok", "Healthy"},
		{"TaskQueue", "one", "Healthy"},
		{"TaskQueue", "paused", "Suspended"},
	}
	for _, w := range want {
		script := map[string]string{"Task": "health-task.lua", "TaskQueue": "health-taskqueue.lua"}[w.kind]
		eventually(t, 120*time.Second, fmt.Sprintf("Argo CD to call %s %s %s", w.kind, w.name, w.health), func(ctx context.Context) (bool, string) {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(w.kind))
			if err := env.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name}, obj); err != nil {
				return false, err.Error()
			}
			h, err := gitops.Check(env.ws.Root, script, obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			return h.Status == w.health, fmt.Sprintf("%s: %s", h.Status, h.Message)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
