// Package workers reads, on MultiKueue worker clusters, what the pods of
// remote attempts said when they ended: their task container's exit code
// and termination message (the output tail and spec.results), so a remote
// attempt's record is the same as a local one's. It reads only on workers
// for which the platform team gave the operator a read-only kubeconfig: a
// Secret in the operator's namespace labelled
// batch.taskops.io/worker-cluster=<MultiKueueCluster name>, key kubeconfig
// (docs/multicluster.md, "Output from the workers"). Without one it reads
// nothing there.
//
// Why a watch and not a read at the end: Kueue deletes the worker's copy
// of a Job (and so its pods) as soon as the Job is finished, at the moment
// the operator learns of the end from the mirrored status. So once a
// namespace has a remote attempt (Follow), the operator watches the Task
// pods of that namespace on every worker it has a kubeconfig for, from then
// on, and keeps each attempt's ended pods (trimmed, bounded) for the status
// to read (Ended), whether or not the worker has deleted them by then.
//
// What lives where: workers.go (Readers: Follow, Ended), kubeconfig.go (a
// Secret to a client, refusing what would let a Secret run a command or
// read a file), pods.go (the trimmed pods kept per attempt).
package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// ErrNoKubeconfig: the operator has no kubeconfig for the worker, so it
// reads nothing there.
var ErrNoKubeconfig = errors.New("no read-only kubeconfig for this worker")

// maxAttempts bounds the attempts whose ended pods a worker keeps: the
// oldest go first. An attempt's pods are read once, soon after it ends.
const maxAttempts = 2048

// Readers follows the worker clusters the operator has kubeconfigs for.
// Its zero value is not usable: use New. Safe for concurrent use.
type Readers struct {
	// secrets reads the kubeconfig Secrets (uncached: at most one list
	// every refreshEvery, and no Secret kept in memory beyond its client).
	secrets   client.Reader
	namespace string
	// newClient builds a worker's client from its kubeconfig (tests
	// replace it); now is the clock.
	newClient func(kubeconfig []byte) (kubernetes.Interface, error)
	now       func() time.Time

	mu        sync.Mutex
	ctx       context.Context // the manager's, once Start ran
	workers   map[string]*worker
	followed  map[string]bool // namespaces with remote attempts
	refreshed time.Time       // when the Secrets were last read
}

// refreshEvery is how often, at most, Follow reads the Secrets again: a
// Secret added, changed or removed counts from then on, and a watch a
// worker refused is tried again.
const refreshEvery = 30 * time.Second

// New returns Readers that find kubeconfig Secrets in namespace through
// secrets. An empty namespace turns the feature off: Follow does nothing
// and Ended says ErrNoKubeconfig.
func New(secrets client.Reader, namespace string) *Readers {
	return &Readers{secrets: secrets, namespace: namespace, newClient: clientFor, now: time.Now,
		workers: map[string]*worker{}, followed: map[string]bool{}}
}

// Start implements manager.Runnable: it keeps the manager's context, which
// ends every watch, and waits for it.
func (r *Readers) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: only the leader dispatches and reads.
func (r *Readers) NeedLeaderElection() bool { return true }

// worker is one worker cluster's client, built from the Secret version it
// names, and its watches.
type worker struct {
	version string
	client  kubernetes.Interface
	// ctx ends the worker's watches: with the manager, or when its
	// Secret changes or goes (stop).
	ctx     context.Context
	stop    context.CancelFunc
	watched map[string]*watchState // by namespace
	ended   *endedPods
}

type watchState struct {
	mu  sync.Mutex
	err error
	// ended is closed when the watch gave up: the worker refused it
	// (forbidden: no RoleBinding in that namespace, or unauthorized), or
	// the worker's Secret changed. The next refresh starts it again,
	// rather than asking for ever.
	ended chan struct{}
}

// over reports whether the watch gave up.
func (st *watchState) over() bool {
	select {
	case <-st.ended:
		return true
	default:
		return false
	}
}

// Follow makes sure the Task pods of namespace ns are watched on every
// worker cluster the operator has a kubeconfig for, from now on. It is
// called on every pass of a Task with a remote attempt, so it is cheap: it
// reads the Secrets at most once every refreshEvery.
func (r *Readers) Follow(ctx context.Context, ns string) error {
	r.mu.Lock()
	fresh := r.followed[ns] && r.now().Sub(r.refreshed) < refreshEvery
	r.mu.Unlock()
	if fresh || r.namespace == "" {
		return nil
	}
	var list corev1.SecretList
	if err := r.secrets.List(ctx, &list, client.InNamespace(r.namespace), client.HasLabels{v1alpha1.LabelWorkerCluster}); err != nil {
		return fmt.Errorf("reading the workers' kubeconfig Secrets in %s: %w", r.namespace, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return errors.New("the worker readers have not started")
	}
	r.followed[ns] = true
	r.refreshed = r.now()
	errs := r.refresh(ctx, list.Items)
	for cluster, w := range r.workers {
		for n := range r.followed {
			if st, ok := w.watched[n]; !ok || st.over() {
				st = &watchState{ended: make(chan struct{})}
				w.watched[n] = st
				go w.watch(w.ctx, n, st)
				log.FromContext(ctx).Info("watching Task pods on a worker cluster", "cluster", cluster, "namespace", n)
			}
		}
	}
	return errors.Join(errs...)
}

// refresh makes r.workers the workers the Secrets name, each with a client
// built from its Secret's current version. Called with r.mu held.
func (r *Readers) refresh(ctx context.Context, secrets []corev1.Secret) []error {
	var errs []error
	byCluster := map[string][]*corev1.Secret{}
	for i := range secrets {
		c := secrets[i].Labels[v1alpha1.LabelWorkerCluster]
		byCluster[c] = append(byCluster[c], &secrets[i])
	}
	for cluster, w := range r.workers {
		if len(byCluster[cluster]) != 1 || byCluster[cluster][0].ResourceVersion != w.version {
			w.stop() // gone, doubled or changed: its watches end
			delete(r.workers, cluster)
		}
	}
	for cluster, ss := range byCluster {
		if len(ss) > 1 {
			errs = append(errs, fmt.Errorf("%d Secrets in %s are labelled %s=%s; keep one", len(ss), r.namespace, v1alpha1.LabelWorkerCluster, cluster))
			continue
		}
		if _, ok := r.workers[cluster]; ok {
			continue
		}
		c, err := r.newClient(ss[0].Data[KubeconfigKey])
		if err != nil {
			errs = append(errs, fmt.Errorf("the kubeconfig in Secret %s/%s: %w", ss[0].Namespace, ss[0].Name, err))
			continue
		}
		wctx, stop := context.WithCancel(r.ctx)
		r.workers[cluster] = &worker{version: ss[0].ResourceVersion, client: c, ctx: wctx, stop: stop,
			watched: map[string]*watchState{}, ended: newEndedPods(maxAttempts)}
		log.FromContext(ctx).Info("reading Task pods on a worker cluster", "cluster", cluster, "secret", ss[0].Name)
	}
	return errs
}

// Ended are the pods of the attempt whose Job is jobName in namespace ns on
// worker cluster whose task container ended, as the worker last showed
// them; none (and no error) when the watch saw none. The error says why
// nothing can be known: ErrNoKubeconfig, or the watch's own (forbidden,
// unreachable).
func (r *Readers) Ended(cluster, ns, jobName string) ([]corev1.Pod, error) {
	r.mu.Lock()
	w := r.workers[cluster]
	var st *watchState
	if w != nil {
		st = w.watched[ns]
	}
	r.mu.Unlock()
	if w == nil {
		return nil, ErrNoKubeconfig
	}
	if pods := w.ended.get(ns, jobName); len(pods) > 0 {
		return pods, nil
	}
	if st == nil {
		return nil, fmt.Errorf("the operator did not watch namespace %s on %s while the attempt ran", ns, cluster)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return nil, st.err
}

// watch keeps the ended Task pods of namespace ns until ctx ends.
func (w *worker) watch(ctx context.Context, ns string, st *watchState) {
	selector := v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			list, err := w.client.CoreV1().Pods(ns).List(ctx, o)
			st.set(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return w.client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	// As client-go's own informers do: whether the client can stream the
	// initial list (a fake clientset cannot).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, w.client), &corev1.Pod{}, 10*time.Minute, cache.Indexers{})
	_ = inf.SetTransform(trimPod)
	keep := func(obj any) {
		st.set(nil) // the watch works
		if pod, ok := obj.(*corev1.Pod); ok && taskEnded(pod) {
			w.ended.add(pod)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    keep,
		UpdateFunc: func(_, obj any) { keep(obj) },
	})
	ctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	defer close(st.ended)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		st.set(err)
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			giveUp() // asking again will not help until someone grants it
		}
	})
	inf.RunWithContext(ctx)
}

func (st *watchState) set(err error) {
	st.mu.Lock()
	st.err = err
	st.mu.Unlock()
}
