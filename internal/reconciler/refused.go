package reconciler

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/retry"
)

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// failedCreate is the reason of the event the Job controller records when
// the API server refuses one of its pods.
const failedCreate = "FailedCreate"

// podsRefused reads why the Job controller could not create the pods of an
// attempt that has none: its newest FailedCreate event, read from the API
// server (events are not cached), only for an attempt whose start check is
// due and that has no pod. nil when it recorded none.
func (p *pass) podsRefused(ctx context.Context, jobName string) (*retry.Refusal, error) {
	newest, err := p.newestEvent(ctx, fields.Set{"involvedObject.kind": "Job", "involvedObject.name": jobName, "reason": failedCreate})
	if newest == nil || err != nil {
		return nil, err
	}
	return &retry.Refusal{Capacity: capacityRefusal(newest.Message), Message: newest.Message}, nil
}

// capacityRefusal reports whether the API server refused a pod for
// capacity: a ResourceQuota that is used up, or a LimitRange. The Job
// controller passes on only the API server's message, so this reads the
// wording of the two admission plugins (ResourceQuota: "exceeded quota";
// LimitRanger: "usage per Container/Pod"); anything else (a missing
// ServiceAccount, a webhook's refusal) is a broken spec.
func capacityRefusal(msg string) bool {
	for _, s := range []string{"exceeded quota", "usage per Container", "usage per Pod"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// podWarnings fills in, for each pod the start check will call stuck and
// whose containers give no waiting reason, its newest Warning event: the
// best cause the StartTimeout message can name. Read from the API server
// (events are not cached), only for such pods.
func (p *pass) podWarnings(ctx context.Context, pods []retry.PodStart, timeout time.Duration) error {
	for i := range pods {
		if !pods[i].Overdue(timeout, p.now) || pods[i].WaitingReason != "" {
			continue
		}
		e, err := p.newestEvent(ctx, fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pods[i].Name, "type": corev1.EventTypeWarning})
		if err != nil {
			return err
		}
		if e != nil {
			pods[i].Warning = e.Reason + ": " + e.Message
		}
	}
	return nil
}

// newestEvent is the newest event of the Task's namespace that matches the
// field selector, nil when there is none.
func (p *pass) newestEvent(ctx context.Context, match fields.Set) (*corev1.Event, error) {
	var list corev1.EventList
	sel := fields.SelectorFromSet(match)
	if err := p.r.APIReader.List(ctx, &list, ctrl.InNamespace(p.task.Namespace), ctrl.MatchingFieldsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	var newest *corev1.Event
	for i := range list.Items {
		// Event times have whole seconds; on a tie the later in the list
		// wins: the kubelet's event names grow with their creation time.
		e := &list.Items[i]
		if newest == nil || !eventTime(e).Before(eventTime(newest)) {
			newest = e
		}
	}
	return newest, nil
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
