package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
)

// The verbs about one run (run --wait, trigger --wait, wait, cancel --wait,
// results) print a TaskRunView with -o json|yaml|jsonpath=, history a List
// of them: one documented shape (api/cli/v1alpha1) whichever verb printed
// it. -o name prints run/ID, -o wide the runs' table with every column.

// runView is the view of run h of Task t.
func runView(t *v1alpha1.Task, h *v1alpha1.RunRecord) *cliv1alpha1.TaskRunView {
	return &cliv1alpha1.TaskRunView{
		TypeMeta:       cliv1alpha1.TypeMeta(),
		Task:           t.Name,
		Namespace:      t.Namespace,
		RunID:          h.RunID,
		Phase:          string(h.Result),
		Reason:         h.Reason,
		Message:        h.Message,
		Attempts:       h.Attempts,
		Params:         h.Params,
		Results:        h.Results,
		StartTime:      h.StartTime,
		CompletionTime: h.CompletionTime,
		Trigger:        h.Trigger,
	}
}

// currentRunView is the view of the Task's current run; a Task that ended
// before its run had a history entry (an invalid spec) gets one made from
// its status and conditions, so -o prints the same shape for every ending.
func currentRunView(t *v1alpha1.Task) *cliv1alpha1.TaskRunView {
	if h := findRun(t, t.Status.CurrentRun); h != nil {
		return runView(t, h)
	}
	v := &cliv1alpha1.TaskRunView{
		TypeMeta:  cliv1alpha1.TypeMeta(),
		Task:      t.Name,
		Namespace: t.Namespace,
		RunID:     t.Status.CurrentRun,
		Phase:     string(t.Status.Phase),
		Attempts:  t.Status.Attempts,
		Results:   t.Status.Results,
	}
	if v.Phase == "" {
		v.Phase = string(v1alpha1.PhasePending)
	}
	// Failed says why when it holds, else Ready says where the run stands.
	c := condition(t, v1alpha1.ConditionReady)
	if conditionTrue(t, v1alpha1.ConditionFailed) {
		c = condition(t, v1alpha1.ConditionFailed)
	}
	if c != nil {
		v.Reason, v.Message = v1alpha1.Reason(c.Reason), c.Message
	}
	return v
}

// newestFinishedRunView is the view of the newest run that finished (the
// one status.results belongs to), or nil.
func newestFinishedRunView(t *v1alpha1.Task) *cliv1alpha1.TaskRunView {
	for i := range t.Status.History { // newest first
		if h := &t.Status.History[i]; h.Result != v1alpha1.RunResultRunning {
			return runView(t, h)
		}
	}
	return nil
}

// historyViews are the views of the Task's runs, newest first.
func historyViews(t *v1alpha1.Task) []cliv1alpha1.TaskRunView {
	views := make([]cliv1alpha1.TaskRunView, 0, len(t.Status.History))
	for i := range t.Status.History {
		views = append(views, *runView(t, &t.Status.History[i]))
	}
	return views
}

// printRunView prints one run in the -o format: the TaskRunView itself
// for json, yaml and jsonpath=, else as printRunViews prints a run.
func (a *app) printRunView(v *cliv1alpha1.TaskRunView) error {
	if a.output == "name" || a.output == "wide" {
		return a.printRunViews([]cliv1alpha1.TaskRunView{*v}, true)
	}
	return a.printObject(v)
}

// printRunViews prints runs in the -o format: a List for json, yaml and
// jsonpath=, a line or row per run for name and wide.
func (a *app) printRunViews(views []cliv1alpha1.TaskRunView, header bool) error {
	switch a.output {
	case "name":
		for _, v := range views {
			if _, err := fmt.Fprintf(a.out(), "run/%s\n", v.RunID); err != nil {
				return err
			}
		}
		return nil
	case "wide":
		return printRunTable(a.out(), views, a.now(), tableOptions{wide: true, header: header})
	}
	return a.printObject(&cliv1alpha1.TaskRunViewList{TypeMeta: cliv1alpha1.ListKind, Items: views})
}

// printObject prints obj (its apiVersion and kind set) as json, yaml,
// name (an API object's kind/name, a List's one per item) or
// jsonpath=TEMPLATE, with cli-runtime's printers as kubectl get -o does.
func (a *app) printObject(obj runtime.Object) error {
	var p printers.ResourcePrinter
	switch a.output {
	case "name":
		p = &printers.NamePrinter{}
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	default:
		jp, err := printers.NewJSONPathPrinter(strings.TrimPrefix(a.output, jsonpathPrefix))
		if err != nil {
			return err
		}
		jp.AllowMissingKeys(true) // as kubectl get -o jsonpath
		p = jp
	}
	return p.PrintObj(obj, a.out())
}

// tableOptions say how printRunTable prints: wide adds the Task, the
// reason and the values and keeps messages whole (as noTrunc does); header
// prints the columns' names first.
type tableOptions struct {
	wide, noTrunc, header bool
}

// printRunTable prints runs as the history table.
func printRunTable(w io.Writer, views []cliv1alpha1.TaskRunView, now time.Time, o tableOptions) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	// The runs of a Task that runs after others (spec.after) say which
	// upstream runs started them; other Tasks' tables keep their columns.
	trigger := !o.wide && slices.ContainsFunc(views, func(v cliv1alpha1.TaskRunView) bool { return len(v.Trigger) > 0 })
	if o.header {
		head := "RUN\tRESULT\tATTEMPTS\tSTARTED\tFINISHED\tDURATION\tMESSAGE"
		if trigger {
			head = "RUN\tRESULT\tATTEMPTS\tSTARTED\tFINISHED\tDURATION\tTRIGGER\tMESSAGE"
		}
		if o.wide {
			head = "TASK\tRUN\tRESULT\tREASON\tATTEMPTS\tSTARTED\tFINISHED\tDURATION\tPARAMS\tTRIGGER\tMESSAGE"
		}
		fmt.Fprintln(tw, head)
	}
	for _, v := range views {
		dur := "-"
		if d, ok := viewDuration(&v, now); ok {
			dur = formatDuration(d)
		}
		cols := []string{v.RunID, v.Phase, fmt.Sprint(v.Attempts), formatTime(v.StartTime), formatTime(v.CompletionTime), dur,
			messageCell(v.Message, o.noTrunc || o.wide)}
		if trigger {
			cols = slices.Concat(cols[:6], []string{triggerColumn(v.Trigger)}, cols[6:])
		}
		if o.wide {
			reason := string(v.Reason)
			if reason == "" {
				reason = "-"
			}
			cols = slices.Concat([]string{v.Task}, cols[:2], []string{reason}, cols[2:6], []string{paramsColumn(v.Params), triggerColumn(v.Trigger)}, cols[6:])
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// viewDuration is how long the run took, or has run so far.
func viewDuration(v *cliv1alpha1.TaskRunView, now time.Time) (time.Duration, bool) {
	return runDuration(&v1alpha1.RunRecord{StartTime: v.StartTime, CompletionTime: v.CompletionTime}, now)
}

// triggerColumn prints the upstream runs that started a run as
// task/run,task/run, or "-".
func triggerColumn(refs []v1alpha1.TriggerRef) string {
	if len(refs) == 0 {
		return "-"
	}
	var out []string
	for _, r := range refs {
		out = append(out, r.Task+"/"+r.RunID)
	}
	return oneLine(strings.Join(out, ","), 0)
}

// paramsColumn prints a run's values as k=v,k=v (sorted), or "-".
func paramsColumn(params map[string]string) string {
	if len(params) == 0 {
		return "-"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, k+"="+params[k])
	}
	return oneLine(strings.Join(kv, ","), 0)
}
