package reconciler

import (
	"context"
	"fmt"
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

// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=list

// podsRefused reads why the Job controller could not create the pods of an
// attempt that has none: its newest FailedCreate event, read from the API
// server (events are not cached), only for an attempt whose start check is
// due and that has no pod; nil when it recorded none. Whether the refusal
// waits for capacity is retry.ClassifyRefusal's decision, from the
// namespace's ResourceQuotas (read only for a quota's refusal) and the
// Task's resources.
func (p *pass) podsRefused(ctx context.Context, jobName string) (*retry.Refusal, error) {
	newest, err := p.newestEvent(ctx, fields.Set{"involvedObject.kind": "Job", "involvedObject.name": jobName, "reason": failedCreate}, nil)
	if newest == nil || err != nil {
		return nil, err
	}
	var quotas corev1.ResourceQuotaList
	if retry.QuotaRefusal(newest.Message) {
		if err := p.r.APIReader.List(ctx, &quotas, ctrl.InNamespace(p.task.Namespace)); err != nil {
			return nil, fmt.Errorf("listing ResourceQuotas: %w", err)
		}
	}
	var requests, limits corev1.ResourceList
	if res := p.task.Spec.Resources; res != nil {
		requests, limits = res.Requests, res.Limits
	}
	refusal := retry.ClassifyRefusal(newest.Message, requests, limits, quotas.Items)
	return &refusal, nil
}

// podWarnings fills in, for each pod the start check will call stuck and
// whose containers give no waiting reason, its newest Warning event about
// why it cannot start (startFailure): the best cause the StartTimeout
// message can name. Read from the API server (events are not cached), only
// for such pods.
func (p *pass) podWarnings(ctx context.Context, pods []retry.PodStart, timeout time.Duration) error {
	for i := range pods {
		if !pods[i].Overdue(timeout, p.now) || pods[i].WaitingReason != "" {
			continue
		}
		e, err := p.newestEvent(ctx, fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pods[i].Name, "type": corev1.EventTypeWarning}, startFailure)
		if err != nil {
			return err
		}
		if e != nil {
			pods[i].Warning = e.Reason + ": " + e.Message
		}
	}
	return nil
}

// startFailure reports whether a pod's Warning event says why the pod
// cannot start: the kubelet's Failed (image pull, container config),
// FailedMount, FailedCreatePodSandBox and the like, ErrImageNeverPull,
// InspectFailed. Advisory warnings (MissingClusterDNS, say) are not a
// cause, nor is the scheduler's FailedScheduling: waiting for a node is
// waiting for capacity, and once the pod has one it is stale.
func startFailure(e *corev1.Event) bool {
	if e.Reason == "FailedScheduling" {
		return false
	}
	return strings.HasPrefix(e.Reason, "Failed") || strings.HasPrefix(e.Reason, "Err") || e.Reason == "InspectFailed"
}

// newestEvent is the newest event of the Task's namespace that matches the
// field selector and keep (nil: any), nil when there is none.
func (p *pass) newestEvent(ctx context.Context, match fields.Set, keep func(*corev1.Event) bool) (*corev1.Event, error) {
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
		if keep != nil && !keep(e) {
			continue
		}
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
