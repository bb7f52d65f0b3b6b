package reconciler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/internal/plan"
)

// readSkipDates reads the ConfigMap a cron Task's spec.skipDatesFrom
// names, from the API server: the operator caches no ConfigMap data (a
// cluster has many), it watches their metadata only (calendarwatch.go) and
// reads the one a Task names when it plans. A missing ConfigMap or key is
// the plan's to report; the schedule runs on spec.skipDates meanwhile.
func (p *pass) readSkipDates(ctx context.Context, in *plan.Input) error {
	ref := p.task.Spec.SkipDatesFrom
	if ref == nil || p.task.Spec.Schedule == nil {
		return nil
	}
	var cm corev1.ConfigMap
	err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.task.Namespace, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		in.SkipDatesFrom = &plan.SkipDateList{Problem: fmt.Sprintf("ConfigMap %s (spec.skipDatesFrom) does not exist", ref.Name)}
		return nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s (spec.skipDatesFrom): %w", ref.Name, err)
	}
	data, ok := cm.Data[ref.Key]
	if !ok {
		in.SkipDatesFrom = &plan.SkipDateList{Problem: fmt.Sprintf("ConfigMap %s has no key %s (spec.skipDatesFrom)", ref.Name, ref.Key)}
		return nil
	}
	in.SkipDatesFrom = &plan.SkipDateList{Lines: strings.Split(data, "\n")}
	return nil
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
