// Package recorder records the controllers' Kubernetes Events
// (events.k8s.io/v1) in memory that does not grow with the number of Tasks.
//
// client-go's events broadcaster, behind the manager's recorder, keeps a
// copy of every Event it sent for 6 to 12 minutes (to merge repeats into a
// series) and starts a goroutine per Event: a burst of runs ending holds an
// Event per Task long after it was sent. This recorder keeps, per recent
// Event, only its key and name (a bounded LRU, MaxSeries), holds the Events
// still to send in a bounded queue (QueueSize), and sends them from a few
// workers at a bounded rate (QPS, Burst). Invariant: what it holds is at
// most QueueSize Events plus MaxSeries keys, whatever the number of Tasks.
//
// Events are a courtesy; the Task's status is the record. So a full queue
// drops the Event (counted: taskoperator_events_dropped_total) rather than
// block a pass, and a refusal that may pass (guards.MayPass) is tried a few
// times with backoff, then dropped and counted too.
package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/metrics"
)

// Options bound the recorder; the zero value of a field takes its default.
type Options struct {
	// QueueSize is how many Events may wait to be sent (default 1024).
	QueueSize int
	// MaxSeries is how many recent Events are remembered to count
	// repeats into a series (default 512).
	MaxSeries int
	// QPS and Burst bound the rate of writes (default 50 and 100).
	QPS   float32
	Burst int
	// Workers send the queued Events (default 2).
	Workers int
	// Tries is how often a write refused for a reason that may pass is
	// tried (default 3), Backoff the wait after the first refusal,
	// doubled after each (default 1s).
	Tries   int
	Backoff time.Duration
	// Clock stamps the Events (default the real clock).
	Clock clock.PassiveClock
}

// SeriesWindow is how long after an Event its repeats count into its
// series rather than make a new Event (client-go's finishTime).
const SeriesWindow = 6 * time.Minute

// MaxNote is the longest note the API server accepts (events.k8s.io/v1).
const MaxNote = 1024

// Recorder is an events.EventRecorder with bounded memory; Start (a
// manager.Runnable) sends what Eventf queued.
type Recorder struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	opts       Options
	limiter    flowcontrol.RateLimiter
	queue      chan *eventsv1.Event

	mu     sync.Mutex
	recent *lru.Cache // key -> *series
}

// series is what is remembered of a recent Event: enough to patch its
// count, not the Event.
type series struct {
	name, namespace string
	count           int32
	last            time.Time
}

var _ events.EventRecorder = (*Recorder)(nil)

// New makes a recorder that writes with c as controller (the Events'
// reportingController; reportingInstance adds the host name).
func New(c client.Client, scheme *runtime.Scheme, controller string, opts Options) *Recorder {
	opts = withDefaults(opts)
	host, _ := os.Hostname()
	instance := controller + "-" + host
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return &Recorder{
		client: c, scheme: scheme, controller: controller, instance: instance, opts: opts,
		limiter: flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst),
		queue:   make(chan *eventsv1.Event, opts.QueueSize),
		recent:  lru.New(opts.MaxSeries),
	}
}

func withDefaults(o Options) Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.QueueSize, 1024)
	def(&o.MaxSeries, 512)
	def(&o.Burst, 100)
	def(&o.Workers, 2)
	def(&o.Tries, 3)
	if o.QPS <= 0 {
		o.QPS = 50
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Eventf queues an Event about regarding (and related, may be nil); it
// never blocks.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ev, err := r.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		// Only an object the scheme does not know: a programming error,
		// counted (there is no logger here).
		metrics.EventsDropped.WithLabelValues(metrics.EventUnreferenced).Inc()
		return
	}
	r.enqueue(ev)
}

// event builds the Event, or says why it cannot be.
func (r *Recorder) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, err
	}
	var relRef *corev1.ObjectReference
	if related != nil {
		relRef, _ = reference.GetReference(r.scheme, related) // optional, as in client-go
	}
	if len(note) > MaxNote {
		note = note[:MaxNote-3] + "..."
	}
	now := r.opts.Clock.Now()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()),
			Namespace: namespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relRef,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// key is what makes two Events the same: what they are about, what they
// say, and who says it.
func key(ev *eventsv1.Event) string {
	var related types.UID
	if ev.Related != nil {
		related = ev.Related.UID
	}
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", ev.Regarding.UID, ev.Regarding.Name, related, ev.Type, ev.Reason, ev.Action, ev.Note)
}

// enqueue makes a repeat of a recent Event a count on its series (sent as
// a patch) and queues the write, or drops it when the queue is full.
func (r *Recorder) enqueue(ev *eventsv1.Event) {
	now := ev.EventTime.Time
	k := key(ev)
	r.mu.Lock()
	if v, ok := r.recent.Get(k); ok && now.Sub(v.(*series).last) < SeriesWindow {
		s := v.(*series)
		s.count++
		s.last = now
		ev.Name, ev.Namespace = s.name, s.namespace
		ev.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(now)}
	} else {
		r.recent.Add(k, &series{name: ev.Name, namespace: ev.Namespace, count: 1, last: now})
	}
	r.mu.Unlock()
	select {
	case r.queue <- ev:
	default:
		metrics.EventsDropped.WithLabelValues(metrics.EventQueueFull).Inc()
	}
}

// NeedLeaderElection is false: a replica that lost the lease still sends
// what its passes queued before.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start sends the queued Events until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (r *Recorder) work(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx).WithName("events")
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			if err := r.send(ctx, ev); err != nil && ctx.Err() == nil {
				log.V(1).Info("an Event was not recorded", "reason", ev.Reason, "regarding", ev.Regarding.Name, "error", err.Error())
			}
		}
	}
}

// send writes one Event: a new one is created, a repeat patches its
// series' count (created whole if the first is gone). A refusal that may
// pass is tried again after a backoff, up to Tries; any other is final.
func (r *Recorder) send(ctx context.Context, ev *eventsv1.Event) error {
	wait := r.opts.Backoff
	for try := 1; ; try++ {
		if err := r.limiter.Wait(ctx); err != nil {
			return err
		}
		err := r.write(ctx, ev)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !guards.MayPass(err) {
			metrics.EventsDropped.WithLabelValues(metrics.EventRefused).Inc()
			return err
		}
		if try >= r.opts.Tries {
			metrics.EventsDropped.WithLabelValues(metrics.EventGaveUp).Inc()
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (r *Recorder) write(ctx context.Context, ev *eventsv1.Event) error {
	if ev.Series != nil {
		patch, err := json.Marshal(map[string]any{"series": ev.Series})
		if err != nil {
			return err
		}
		err = r.client.Patch(ctx, ev.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return r.client.Create(ctx, ev.DeepCopy())
}
