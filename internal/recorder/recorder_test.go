package recorder

import (
	"context"
	"errors"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/metrics"
	tu "github.com/taskops/task-operator/internal/testutil"
)

// fastOpts are options for tests: no rate limit to speak of, short backoff.
func fastOpts() Options {
	return Options{QPS: 1000, Burst: 1000, Backoff: time.Millisecond}
}

// started makes a recorder over c and runs it until the test ends.
func started(t *testing.T, c client.Client, opts Options) *Recorder {
	t.Helper()
	r := New(c, tu.Scheme(), "task-operator", opts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = r.Start(ctx) }()
	return r
}

// recorded polls until c holds n Events and returns them.
func recorded(t *testing.T, c client.Client, n int) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		return len(list.Items) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d Events: %v (have %d)", n, err, len(list.Items))
	}
	return list.Items
}

func task(name string) *v1alpha1.Task {
	tk := tu.NewTask("ns", name)
	tk.UID = types.UID("uid-" + name)
	return tk
}

func TestAnEventSaysWhatAboutWhatAndWho(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(tu.Scheme()).Build()
	r := started(t, c, fastOpts())
	r.Eventf(task("etl"), nil, "Normal", "Succeeded", "Finish", "run %s succeeded", "0")
	ev := recorded(t, c, 1)[0]
	if ev.Namespace != "ns" || ev.Regarding.Name != "etl" || ev.Regarding.Kind != "Task" || ev.Reason != "Succeeded" ||
		ev.Action != "Finish" || ev.Type != "Normal" || ev.Note != "run 0 succeeded" || ev.ReportingController != "task-operator" ||
		ev.EventTime.IsZero() || ev.Series != nil {
		t.Errorf("the Event is %+v", ev)
	}
}

func TestARepeatWithinTheWindowCountsIntoItsSeries(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(tu.Scheme()).Build()
	r := New(c, tu.Scheme(), "task-operator", fastOpts())
	for range 3 {
		r.Eventf(task("etl"), nil, "Warning", "Refused", "Create", "refused")
	}
	r.Eventf(task("etl"), nil, "Warning", "Refused", "Create", "refused, otherwise") // another note: another Event
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Start(ctx) }()
	// Queued in order, sent by two workers: wait until the series shows 3.
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		counts := map[string]int32{}
		for _, ev := range list.Items {
			counts[ev.Note] = 1
			if ev.Series != nil {
				counts[ev.Note] = ev.Series.Count
			}
		}
		return len(list.Items) == 2 && counts["refused"] == 3 && counts["refused, otherwise"] == 1, nil
	})
	if err != nil {
		t.Fatalf("want one Event counted 3 times and one other: %v", err)
	}
}

func TestAFullQueueDropsTheEventAndNeverBlocks(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(tu.Scheme()).Build()
	opts := fastOpts()
	opts.QueueSize = 2
	r := New(c, tu.Scheme(), "task-operator", opts) // not started: nothing leaves the queue
	before := testutil.ToFloat64(metrics.EventsDropped.WithLabelValues(metrics.EventQueueFull))
	done := make(chan struct{})
	go func() {
		for i := range 5 {
			r.Eventf(task("t"+string(rune('a'+i))), nil, "Normal", "Succeeded", "Finish", "done")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if got := testutil.ToFloat64(metrics.EventsDropped.WithLabelValues(metrics.EventQueueFull)) - before; got != 3 {
		t.Errorf("dropped %v Events, want 3", got)
	}
}

func TestWhatItRemembersIsBoundedWhateverTheNumberOfTasks(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(tu.Scheme()).Build()
	opts := fastOpts()
	opts.MaxSeries, opts.QueueSize = 8, 8
	r := New(c, tu.Scheme(), "task-operator", opts)
	for i := range 1000 {
		r.Eventf(task("t"+string(rune(i))), nil, "Normal", "Succeeded", "Finish", "done")
	}
	if n, q := r.recent.Len(), len(r.queue); n > 8 || q > 8 {
		t.Errorf("remembers %d Events and queues %d, want at most 8 each", n, q)
	}
}

func TestARefusalThatMayPassIsTriedAgainAndOneThatWillNotIsDropped(t *testing.T) {
	unavailable := 2
	c := fake.NewClientBuilder().WithScheme(tu.Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			ev := obj.(*eventsv1.Event)
			switch {
			case ev.Regarding.Name == "forbidden":
				return apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, ev.Name, errors.New("a policy says no"))
			case unavailable > 0:
				unavailable--
				return apierrors.NewServiceUnavailable("a webhook is restarting")
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	opts := fastOpts()
	opts.Workers = 1 // in order: the refused one first
	r := started(t, c, opts)
	before := testutil.ToFloat64(metrics.EventsDropped.WithLabelValues(metrics.EventRefused))
	r.Eventf(task("forbidden"), nil, "Normal", "Succeeded", "Finish", "done")
	r.Eventf(task("etl"), nil, "Normal", "Succeeded", "Finish", "done")
	if ev := recorded(t, c, 1)[0]; ev.Regarding.Name != "etl" {
		t.Errorf("recorded the Event about %s", ev.Regarding.Name)
	}
	if got := testutil.ToFloat64(metrics.EventsDropped.WithLabelValues(metrics.EventRefused)) - before; got != 1 {
		t.Errorf("dropped as refused: %v, want 1", got)
	}
}

func TestALongNoteIsCutToWhatTheAPIServerTakes(t *testing.T) {
	r := New(nil, tu.Scheme(), "task-operator", Options{})
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'x'
	}
	ev, err := r.event(task("etl"), nil, "Warning", "Failed", "Finish", string(long))
	if err != nil || len(ev.Note) != MaxNote {
		t.Errorf("note of %d bytes, err %v; want %d", len(ev.Note), err, MaxNote)
	}
}
