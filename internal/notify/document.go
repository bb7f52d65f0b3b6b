package notify

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// DocumentKind names the outcome document, so a receiver can tell it from
// other webhooks it gets.
const DocumentKind = "TaskRunOutcome"

// Document is the JSON body a `format: json` webhook receives (and what a
// `slack` message is written from): which Task, which run, how it ended.
type Document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Event is Failed, Succeeded or Recovered.
	Event     v1alpha1.NotifyOn `json:"event"`
	Namespace string            `json:"namespace"`
	Task      string            `json:"task"`
	RunID     string            `json:"runID"`
	// Result and Reason are the run's, as in status.history.
	Result   v1alpha1.RunResult `json:"result"`
	Reason   v1alpha1.Reason    `json:"reason,omitempty"`
	Attempts int32              `json:"attempts"`
	// Times are RFC 3339, UTC; ScheduledTime only for a cron slot's run.
	ScheduledTime  string `json:"scheduledTime,omitempty"`
	StartTime      string `json:"startTime,omitempty"`
	CompletionTime string `json:"completionTime,omitempty"`
	Message        string `json:"message,omitempty"`
	// Params are the values the run started with; Results what it handed
	// back (spec.params, spec.results), as in status.history.
	Params  map[string]string `json:"params,omitempty"`
	Results map[string]string `json:"results,omitempty"`
}

// NewDocument is the outcome document of a finished run of task.
func NewDocument(task *v1alpha1.Task, rec v1alpha1.RunRecord, ev v1alpha1.NotifyOn) Document {
	return Document{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: DocumentKind, Event: ev,
		Namespace: task.Namespace, Task: task.Name, RunID: rec.RunID,
		Result: rec.Result, Reason: rec.Reason, Attempts: rec.Attempts,
		ScheduledTime: stamp(rec.ScheduledTime), StartTime: stamp(rec.StartTime), CompletionTime: stamp(rec.CompletionTime),
		Message: rec.Message, Params: rec.Params, Results: rec.Results,
	}
}

func stamp(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// JSON is the document as sent.
func (d Document) JSON() string {
	b, _ := json.Marshal(d) // strings, numbers and maps of strings: cannot fail
	return string(b)
}

// Slack is the document as a Slack-compatible message ({"text": ...}),
// which Slack, Mattermost, Rocket.Chat and Teams' Slack-compatible
// endpoints accept.
func (d Document) Slack() string {
	var b strings.Builder
	switch d.Event {
	case v1alpha1.NotifyOnFailed:
		fmt.Fprintf(&b, "Task %s/%s: run %s failed", d.Namespace, d.Task, d.RunID)
		if d.Reason != "" {
			fmt.Fprintf(&b, " (%s)", d.Reason)
		}
	case v1alpha1.NotifyOnRecovered:
		fmt.Fprintf(&b, "Task %s/%s: run %s succeeded again (recovered)", d.Namespace, d.Task, d.RunID)
	default:
		fmt.Fprintf(&b, "Task %s/%s: run %s succeeded", d.Namespace, d.Task, d.RunID)
	}
	fmt.Fprintf(&b, " after %d attempt(s)", d.Attempts)
	if d.Message != "" {
		b.WriteString("\n")
		b.WriteString(d.Message)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Results)) {
		fmt.Fprintf(&b, "\n%s: %s", k, d.Results[k])
	}
	out, _ := json.Marshal(map[string]string{"text": b.String()})
	return string(out)
}
