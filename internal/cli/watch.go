package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// watchTimeoutSeconds makes the API server end each watch after a while;
// the loop then watches again from the last resourceVersion. A variable so
// tests can shorten it.
var watchTimeoutSeconds int64 = 300

const (
	// retryInterval paces re-gets after a failed watch or get, and the
	// polling fallback when watching is not allowed.
	retryInterval = time.Second
	// pollInterval is used when the user may get but not watch Tasks.
	pollInterval = 2 * time.Second
)

// errTaskDeleted: the Task went away while we waited for it.
var errTaskDeleted = errors.New("deleted while waiting")

// observeFunc is called with every version of the Task seen; returning
// true ends the watch.
type observeFunc func(task *v1alpha1.Task) (done bool)

// watchTask calls observe with the Task's current state and then with every
// change until observe returns true, the Task is deleted (errTaskDeleted) or
// ctx ends (ctx.Err()). It watches from the resourceVersion of its last get,
// watches again when the server ends a watch, and gets the Task anew when the
// resourceVersion expired (410 Gone). When the user may get but not watch
// Tasks it polls instead.
func watchTask(ctx context.Context, c client.WithWatch, key types.NamespacedName, observe observeFunc) error {
	poll := false
	first := true
	for {
		task := &v1alpha1.Task{}
		if err := c.Get(ctx, key, task); err != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case apierrors.IsNotFound(err):
				if first {
					return err
				}
				return errTaskDeleted
			case first || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
				return err
			}
			// A transient error (API server restarting, throttling): retry.
			if err := pause(ctx, retryInterval); err != nil {
				return err
			}
			continue
		}
		first = false
		if observe(task) {
			return nil
		}
		if poll {
			if err := pause(ctx, pollInterval); err != nil {
				return err
			}
			continue
		}
		done, err := watchFrom(ctx, c, key, task.ResourceVersion, observe)
		switch {
		case done:
			return nil
		case errors.Is(err, errTaskDeleted), ctx.Err() != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
			poll = true
		case err != nil:
			// Expired resourceVersion or a transient failure: get anew
			// (after a pause unless the version merely expired).
			if !isExpired(err) {
				if err := pause(ctx, retryInterval); err != nil {
					return err
				}
			}
		}
	}
}

// watchFrom watches the Task from resourceVersion rv, watching again from
// the newest version seen each time the server closes the watch. It
// returns done when observe said so, or the error that needs a new get.
func watchFrom(ctx context.Context, c client.WithWatch, key types.NamespacedName, rv string, observe observeFunc) (bool, error) {
	for {
		timeout := watchTimeoutSeconds
		w, err := c.Watch(ctx, &v1alpha1.TaskList{},
			client.InNamespace(key.Namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)},
			&client.ListOptions{Raw: &metav1.ListOptions{
				ResourceVersion:     rv,
				AllowWatchBookmarks: true,
				TimeoutSeconds:      &timeout,
			}})
		if err != nil {
			return false, err
		}
		done, newRV, err := consume(ctx, w, observe)
		w.Stop()
		if done || err != nil {
			return done, err
		}
		if newRV != "" {
			rv = newRV
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
}

// consume reads one watch until it ends. It returns the newest
// resourceVersion seen so the next watch resumes from there.
func consume(ctx context.Context, w watch.Interface, observe observeFunc) (done bool, rv string, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, rv, nil // the server ended the watch: resume
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				task, ok := ev.Object.(*v1alpha1.Task)
				if !ok {
					continue
				}
				rv = task.ResourceVersion
				if observe(task) {
					return true, rv, nil
				}
			case watch.Deleted:
				return false, rv, errTaskDeleted
			case watch.Bookmark:
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
			case watch.Error:
				return false, rv, apierrors.FromObject(ev.Object)
			}
		}
	}
}

// isExpired: the resourceVersion we watched from is too old.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// notFoundError says which Task is missing where.
func notFoundError(key types.NamespacedName) error {
	return fmt.Errorf("task %q not found in namespace %q", key.Name, key.Namespace)
}

// getTask reads a Task; a missing one is notFoundError.
func (c *clients) getTask(ctx context.Context, key types.NamespacedName) (*v1alpha1.Task, error) {
	task := &v1alpha1.Task{}
	if err := c.ctrl.Get(ctx, key, task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFoundError(key)
		}
		return nil, err
	}
	return task, nil
}
