package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
)

// receiver is a webhook that records what it got and answers with the
// status codes it is given, one per request (the last one repeats).
type receiver struct {
	mu       sync.Mutex
	bodies   []string
	headers  []http.Header
	statuses []int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, string(b))
	r.headers = append(r.headers, req.Header.Clone())
	code := http.StatusOK
	if len(r.statuses) > 0 {
		code = r.statuses[0]
		if len(r.statuses) > 1 {
			r.statuses = r.statuses[1:]
		}
	}
	w.WriteHeader(code)
}

var doc = notify.Document{APIVersion: "batch.taskops.io/v1alpha1", Kind: notify.DocumentKind, Event: v1alpha1.NotifyOnFailed,
	Namespace: "team-a", Task: "nightly", RunID: "s1764556200", Result: v1alpha1.RunResultFailed,
	Reason: v1alpha1.ReasonRetriesExhausted, Attempts: 3, StartTime: "2026-12-01T02:30:00Z", CompletionTime: "2026-12-01T02:31:10Z",
	Message: "RetriesExhausted: exit 3"}

type sent struct {
	code        int
	log         string
	termination string
	waits       []time.Duration
}

func send(t *testing.T, env map[string]string) sent {
	t.Helper()
	term := filepath.Join(t.TempDir(), "termination-log")
	env[EnvTerminationLog] = term
	if _, ok := env[notify.EnvDocument]; !ok {
		env[notify.EnvDocument] = doc.JSON()
	}
	var out bytes.Buffer
	var waits []time.Duration
	s := Sender{Wait: func(_ context.Context, d time.Duration) { waits = append(waits, d) }}
	code := s.Run(context.Background(), func(k string) string { return env[k] }, &out)
	b, _ := os.ReadFile(term)
	return sent{code: code, log: out.String(), termination: string(b), waits: waits}
}

func TestTheJSONFormatPostsTheOutcomeDocument(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	res := send(t, map[string]string{notify.EnvTargets: "0", "TASK_NOTIFY_0_URL": srv.URL + "/hook", "TASK_NOTIFY_0_FORMAT": "json"})
	if res.code != ExitSent || len(rcv.bodies) != 1 {
		t.Fatalf("exit %d, %d requests; log:\n%s", res.code, len(rcv.bodies), res.log)
	}
	var got notify.Document
	if err := json.Unmarshal([]byte(rcv.bodies[0]), &got); err != nil || !reflect.DeepEqual(got, doc) {
		t.Fatalf("body %s (%v), want the document %+v", rcv.bodies[0], err, doc)
	}
	if ct := rcv.headers[0].Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestTheSlackFormatPostsOneTextField(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	res := send(t, map[string]string{notify.EnvTargets: "1", "TASK_NOTIFY_1_URL": srv.URL, "TASK_NOTIFY_1_FORMAT": "slack"})
	if res.code != ExitSent || len(rcv.bodies) != 1 {
		t.Fatalf("exit %d, %d requests", res.code, len(rcv.bodies))
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(rcv.bodies[0]), &msg); err != nil || len(msg) != 1 ||
		!strings.Contains(msg["text"], "team-a/nightly: run s1764556200 failed (RetriesExhausted) after 3 attempt(s)") {
		t.Fatalf("slack body %s (%v)", rcv.bodies[0], err)
	}
}

func TestASecretHeaderArrivesAndIsMaskedInTheLogAndTerminationMessage(t *testing.T) {
	const token = "Bearer s3cr3t-t0ken-value-42"
	const hookPath = "/services/T000/B000/XXXXXXXXXXXXXXXX"
	rcv := &receiver{statuses: []int{http.StatusServiceUnavailable, http.StatusOK}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	res := send(t, map[string]string{
		notify.EnvTargets: "0", "TASK_NOTIFY_0_URL": srv.URL + hookPath, "TASK_NOTIFY_0_URL_SENSITIVE": "true",
		"TASK_NOTIFY_0_HEADER_0_NAME": "Authorization", "TASK_NOTIFY_0_HEADER_0_VALUE": token, "TASK_NOTIFY_0_HEADER_0_SENSITIVE": "true",
	})
	if res.code != ExitSent || len(rcv.bodies) != 2 {
		t.Fatalf("exit %d after %d requests; log:\n%s", res.code, len(rcv.bodies), res.log)
	}
	if got := rcv.headers[1].Get("Authorization"); got != token {
		t.Errorf("Authorization arrived as %q", got)
	}
	for what, text := range map[string]string{"log": res.log, "termination message": res.termination} {
		if strings.Contains(text, "s3cr3t") || strings.Contains(text, "XXXXXXXXXXXXXXXX") {
			t.Errorf("the %s shows a secret:\n%s", what, text)
		}
		if !strings.Contains(text, "/***") {
			t.Errorf("the %s does not show the masked URL:\n%s", what, text)
		}
	}
	if !strings.Contains(res.log, "Authorization: ***") {
		t.Errorf("the log does not show the masked header:\n%s", res.log)
	}
}

func TestAWebhookThatKeepsFailingIsTriedThreeTimesThenTheNotificationFails(t *testing.T) {
	rcv := &receiver{statuses: []int{http.StatusServiceUnavailable}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	res := send(t, map[string]string{notify.EnvTargets: "0", "TASK_NOTIFY_0_URL": srv.URL})
	if res.code != ExitNotSent || len(rcv.bodies) != MaxAttempts {
		t.Fatalf("exit %d after %d requests, want %d after %d", res.code, len(rcv.bodies), ExitNotSent, MaxAttempts)
	}
	if len(res.waits) != 2 || res.waits[0] != time.Second || res.waits[1] != 2*time.Second {
		t.Errorf("pauses %v, want [1s 2s]", res.waits)
	}
	if !strings.Contains(res.termination, "not sent") || !strings.Contains(res.termination, "HTTP 503") {
		t.Errorf("termination message %q", res.termination)
	}
}

func TestAnUnreachableWebhookFailsTheNotificationAndTheOthersAreStillTold(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	res := send(t, map[string]string{notify.EnvTargets: "0,1", "TASK_NOTIFY_0_URL": downURL, "TASK_NOTIFY_1_URL": srv.URL})
	if res.code != ExitNotSent || len(rcv.bodies) != 1 {
		t.Fatalf("exit %d, %d requests to the reachable webhook", res.code, len(rcv.bodies))
	}
	if strings.Count(res.log, "target 0 (json), attempt") != MaxAttempts {
		t.Errorf("log does not show %d tries of target 0:\n%s", MaxAttempts, res.log)
	}
}

func TestABrokenDefinitionIsNotRetried(t *testing.T) {
	res := send(t, map[string]string{notify.EnvTargets: "zero"})
	if res.code != ExitBadDefinition || !strings.Contains(res.termination, notify.EnvTargets) {
		t.Fatalf("exit %d, %q", res.code, res.termination)
	}
}
