package reconciler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
)

// readSkipDates reads the ConfigMap a cron Task's spec.skipDatesFrom
// names, from the API server, when the Task plans. The operator has no
// read of ConfigMaps of its own (they hold other tenants' configuration):
// a namespace that uses skipDatesFrom grants it get on its ConfigMaps with
// a RoleBinding (SkipDatesGrant). Nothing watches them, so an edit counts
// from the Task's next pass (at the latest its next slot). A ConfigMap or
// key that is missing, or one the namespace did not grant, is the plan's
// to report (the Ready message and a SkipDatesUnreadable event); the
// schedule runs on spec.skipDates meanwhile.
func (p *pass) readSkipDates(ctx context.Context, in *plan.Input) error {
	ref := p.task.Spec.SkipDatesFrom
	if ref == nil || !plan.HeldToCalendar(p.task) {
		return nil
	}
	var cm corev1.ConfigMap
	err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.task.Namespace, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		in.SkipDatesFrom = &plan.SkipDateList{Problem: fmt.Sprintf("ConfigMap %s (spec.skipDatesFrom) does not exist", ref.Name)}
		return nil
	case apierrors.IsForbidden(err):
		in.SkipDatesFrom = &plan.SkipDateList{Problem: fmt.Sprintf("the operator may not read ConfigMap %s (spec.skipDatesFrom): grant it in this namespace with %s",
			ref.Name, SkipDatesGrant(p.task.Namespace))}
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

// +kubebuilder:rbac:groups=batch.taskops.io,resources=taskcalendars,verbs=get;list;watch

// readCalendars reads, from the cache, the TaskCalendars a cron Task's
// spec.skipCalendars names: cluster-scoped holiday lists the platform team
// owns, watched (calendarwatch.go), so an edit wakes the Tasks naming
// them. One that does not exist is the plan's to report; the schedule
// runs on the other dates meanwhile.
func (p *pass) readCalendars(ctx context.Context, in *plan.Input) error {
	if !plan.HeldToCalendar(p.task) {
		return nil
	}
	for _, name := range p.task.Spec.SkipCalendars {
		var cal v1alpha1.TaskCalendar
		switch err := p.r.Client.Get(ctx, types.NamespacedName{Name: name}, &cal); {
		case apierrors.IsNotFound(err):
			in.Calendars = append(in.Calendars, plan.SkipDateList{Source: "TaskCalendar " + name,
				Problem: fmt.Sprintf("TaskCalendar %s (spec.skipCalendars) does not exist", name)})
		case err != nil:
			return fmt.Errorf("reading TaskCalendar %s (spec.skipCalendars): %w", name, err)
		default:
			in.Calendars = append(in.Calendars, plan.SkipDateList{Source: "TaskCalendar " + name, Lines: cal.Spec.Dates})
		}
	}
	return nil
}

// SkipDatesGrant is the command that lets the operator read the
// ConfigMaps of namespace ns (get only), for spec.skipDatesFrom: the
// operator's ServiceAccount as the default install names it.
func SkipDatesGrant(ns string) string {
	return fmt.Sprintf("`kubectl -n %s create role task-operator-skip-dates --verb=get --resource=configmaps && kubectl -n %s create rolebinding task-operator-skip-dates --role=task-operator-skip-dates --serviceaccount=task-operator-system:task-operator-controller-manager`", ns, ns)
}
