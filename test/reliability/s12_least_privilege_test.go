//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// httpTask is an http Task calling url with the given headers.
func httpTask(ns, name, url string, headers []v1alpha1.HTTPHeader, opts ...testutil.TaskOpt) *v1alpha1.Task {
	task := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TaskSpec{
			Type: v1alpha1.TaskTypeHTTP,
			URL:  url,
			HTTP: &v1alpha1.HTTPSpec{Method: "POST", Headers: headers, Body: `{"hello":"world"}`},
		},
	}
	for _, o := range opts {
		o(task)
	}
	return task
}

func secretHeader(name, secret, key string) v1alpha1.HTTPHeader {
	return v1alpha1.HTTPHeader{Name: name, ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: secret, Key: key}}}
}

func literalHeader(name, value string) v1alpha1.HTTPHeader {
	return v1alpha1.HTTPHeader{Name: name, Value: ptr.To(value)}
}

// can asks the API server whether the operator's ServiceAccount may do a
// thing.
func can(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               operatorUser,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	if err := s.c.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// Scenario 12, least privilege: every operator of this suite runs with a
// token of the ServiceAccount config/ renders, bound only to the generated
// RBAC (config/rbac/role.yaml), so every scenario doubles as a check of it
// (each operator log is checked for requests RBAC refused). This test
// checks the permissions themselves, runs the e2e flows once more as that
// identity, and puts a canary Secret value into http and shell Tasks
// (header valueFrom.secretKeyRef, env valueFrom.secretKeyRef): the value
// must never appear in a Task, Job, pod, event or any operator log line.
func TestS12LeastPrivilege(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	t.Run("permissions", func(t *testing.T) {
		type check struct {
			allowed bool
			attrs   authorizationv1.ResourceAttributes
		}
		ns := "some-namespace"
		checks := []check{
			{true, authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "create", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "patch", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Group: "batch.taskops.io", Resource: "tasks", Subresource: "status", Verb: "patch", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Group: "batch.taskops.io", Resource: "tasks", Subresource: "finalizers", Verb: "update", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Resource: "pods", Verb: "list", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Group: "events.k8s.io", Resource: "events", Verb: "create", Namespace: ns}},
			{true, authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: operatorNamespace, Name: leaseName}},
			// Secrets: only listed, only in its own namespace, for the
			// MultiKueue workers' read-only kubeconfigs (internal/workers).
			{true, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: operatorNamespace}},
			{false, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}},
			{false, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: operatorNamespace}},
			// ConfigMaps hold every tenant's configuration: none is read
			// unless its namespace grants it (spec.skipDatesFrom's
			// RoleBinding), and none is ever written.
			{false, authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "get", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "list"}},
			{false, authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "update", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "pods", Verb: "get", Namespace: ns}},
			// Logs: the tail of an attempt stopped while it ran (its deadline).
			{true, authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "log", Verb: "get", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "exec", Verb: "create", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Group: "batch", Resource: "jobs", Verb: "update", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Group: "batch.taskops.io", Resource: "tasks", Verb: "create", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Group: "batch.taskops.io", Resource: "tasks", Verb: "update", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "delete", Name: ns}},
			{false, authorizationv1.ResourceAttributes{Resource: "serviceaccounts", Subresource: "token", Verb: "create", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: ns}},
			{false, authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "escalate"}},
		}
		wrong := 0
		for _, c := range checks {
			ok, err := can(ctx, c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.allowed {
				wrong++
				t.Errorf("%s may %s %s/%s (namespace %q): %v, want %v", operatorUser, c.attrs.Verb, c.attrs.Resource, c.attrs.Subresource, c.attrs.Namespace, ok, c.allowed)
			}
		}
		for _, u := range s.rendered {
			if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
				continue
			}
			b, _ := json.Marshal(u.Object["rules"])
			if strings.Contains(string(b), `"*"`) {
				t.Errorf("%s %s grants a wildcard: %s", u.GetKind(), u.GetName(), b)
			}
			if strings.Contains(string(b), "secrets") && (u.GetKind() != "Role" || !strings.Contains(string(b), `{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}`) ||
				strings.Count(string(b), "secrets") != 1) {
				t.Errorf("%s %s grants secrets beyond list in its own namespace: %s", u.GetKind(), u.GetName(), b)
			}
		}
		allowed := 0
		for _, c := range checks {
			if c.allowed {
				allowed++
			}
		}
		figure(t, "%d SubjectAccessReviews of %s (%d allowed: jobs create/patch, tasks/status patch, tasks/finalizers update, pods list, pods/log get, events create, its lease update, secrets list in its namespace; %d refused: secrets get/list elsewhere/watch, configmaps get/list/update, pods get/create/exec, jobs update, tasks create/update, namespaces delete, tokens, leases elsewhere, escalate): %d wrong",
			len(checks), operatorUser, allowed, len(checks)-allowed, wrong)
	})

	t.Run("canary", func(t *testing.T) {
		ns := s.newNamespace(t, "rel-lpriv", false)
		op := s.startOperator(t, "op", false)
		canary := "canary-" + harness.RandSuffix() + harness.RandSuffix() + harness.RandSuffix()
		s.mu.Lock()
		s.canary = canary
		s.mu.Unlock()
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-token"}, StringData: map[string]string{"token": "Bearer " + canary}})

		shellEnv := testutil.NewTask(ns, "shell-env", func(task *v1alpha1.Task) {
			task.Spec.Env = []v1alpha1.EnvVar{{Name: "TOKEN", ValueFrom: &v1alpha1.EnvVarSource{SecretKeyRef: &v1alpha1.KeySelector{Name: "api-token", Key: "token"}}}}
		})
		tasks := []*v1alpha1.Task{
			httpTask(ns, "http-ok", "https://api.example.com/hook", []v1alpha1.HTTPHeader{secretHeader("Authorization", "api-token", "token"), literalHeader("X-Trace", "plain-value")}),
			httpTask(ns, "http-fails", "https://api.example.com/hook", []v1alpha1.HTTPHeader{secretHeader("Authorization", "api-token", "token")},
				testutil.Retries(1, 1, 1, 1), testutil.PodAnnotations(harness.SimExitCode, "1", harness.SimMessage, "POST https://api.example.com/hook: 401 Unauthorized (Authorization: ***)")),
			shellEnv,
			// The e2e flows, as the ServiceAccount.
			testutil.NewTask(ns, "succeeds"),
			testutil.NewTask(ns, "fails", testutil.Retries(2, 1, 2, 2), testutil.PodAnnotations(harness.SimExitCode, "3")),
			testutil.NewTask(ns, "cannot-start", testutil.StartTimeout(5), testutil.PodAnnotations(harness.SimStart, "never")),
			testutil.NewTask(ns, "deleted", testutil.PodAnnotations(harness.SimRun, "forever")),
		}
		jobs := harness.RecordJobs(t, s.c, ns)
		createAll(t, tasks)
		harness.Eventually(t, 2*time.Minute, "the Task to be deleted to run", note(op), func(ctx context.Context) (bool, string) {
			task, err := harness.GetTask(ctx, s.c, ns, "deleted")
			if err != nil {
				return false, err.Error()
			}
			return task.Status.Phase == v1alpha1.PhaseRunning, string(task.Status.Phase)
		})
		if err := s.c.Delete(ctx, &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted"}}); err != nil {
			t.Fatal(err)
		}
		want := map[string]v1alpha1.TaskPhase{"http-ok": v1alpha1.PhaseSucceeded, "http-fails": v1alpha1.PhaseFailed, "shell-env": v1alpha1.PhaseSucceeded,
			"succeeds": v1alpha1.PhaseSucceeded, "fails": v1alpha1.PhaseFailed, "cannot-start": v1alpha1.PhaseFailed}
		took := eventuallyTasks(t, 3*time.Minute, "the Tasks to finish and the deleted one to go", note(op), ns, func(ctx context.Context, all map[string]*v1alpha1.Task) (bool, string) {
			var pending []string
			for name, ph := range want {
				if task := all[name]; task == nil || task.Status.Phase != ph {
					pending = append(pending, name)
				}
			}
			if all["deleted"] != nil {
				pending = append(pending, "deleted (still there)")
			}
			return len(pending) == 0, "waiting for " + strings.Join(pending, ", ")
		})
		seen := jobs.All(t)
		for k, js := range harness.Duplicates(seen) {
			t.Errorf("%d Jobs for Task %s run %s attempt %s: %v", len(js), k.Task, k.Run, k.Attempt, js)
		}
		// The Job of the http Task passes the header by reference, marked
		// sensitive, as the contract says.
		for _, j := range seen {
			if j.Labels[v1alpha1.LabelTask] != "http-ok" {
				continue
			}
			env := map[string]corev1.EnvVar{}
			for _, e := range j.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e
			}
			h := env["TASK_HTTP_HEADER_0_VALUE"]
			if h.ValueFrom == nil || h.ValueFrom.SecretKeyRef == nil || h.ValueFrom.SecretKeyRef.Name != "api-token" || h.Value != "" {
				t.Errorf("Job %s: TASK_HTTP_HEADER_0_VALUE = %+v, want a secretKeyRef to api-token", j.Name, h)
			}
			if env["TASK_HTTP_HEADER_0_SENSITIVE"].Value != "true" {
				t.Errorf("Job %s: TASK_HTTP_HEADER_0_SENSITIVE = %q, want true", j.Name, env["TASK_HTTP_HEADER_0_SENSITIVE"].Value)
			}
		}

		// Grep everything for the canary.
		var places []string
		scanned := map[string]int{}
		look := func(kind string, objs any) {
			b, err := json.Marshal(objs)
			if err != nil {
				t.Fatal(err)
			}
			scanned[kind] += len(b)
			if strings.Contains(string(b), canary) {
				places = append(places, kind)
			}
		}
		all := ctxFor(t, time.Minute)
		var taskList v1alpha1.TaskList
		var jobList batchv1.JobList
		var podList corev1.PodList
		var events corev1.EventList
		var events2 eventsv1.EventList
		for name, list := range map[string]client.ObjectList{"Tasks": &taskList, "Jobs": &jobList, "pods": &podList, "events (core/v1)": &events, "events (events.k8s.io/v1)": &events2} {
			if err := s.c.List(all, list); err != nil {
				t.Fatalf("listing %s: %v", name, err)
			}
			look(name, list)
		}
		// Jobs deleted on the way (the deleted Task's) count too.
		look("Jobs seen", seen)
		logs, _ := filepath.Glob(filepath.Join(s.logsDir, "*.log"))
		for _, f := range logs {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			scanned["operator logs"] += len(b)
			if strings.Contains(string(b), canary) {
				places = append(places, "operator log "+f)
			}
		}
		if len(places) > 0 {
			t.Errorf("the canary Secret value appears in: %s", strings.Join(places, ", "))
		}
		// Control: the canary is where it belongs.
		sec := &corev1.Secret{}
		if err := s.c.Get(all, client.ObjectKey{Namespace: ns, Name: "api-token"}, sec); err != nil || !strings.Contains(string(sec.Data["token"]), canary) {
			t.Errorf("control: the Secret does not hold the canary (%v)", err)
		}
		if _, err := harness.GetTask(all, s.c, ns, "deleted"); !apierrors.IsNotFound(err) {
			t.Errorf("the deleted Task is still there: %v", err)
		}
		figure(t, "as %s: %d Tasks (http with a Secret header, failing http, shell with a Secret env, succeed, fail after retries, start timeout, delete while running) all ended as expected in %s; canary searched in %d KiB of Tasks/Jobs/pods/events and %d operator logs (%d KiB): found in %d places",
			operatorUser, len(tasks), harness.Secs(took), (scanned["Tasks"]+scanned["Jobs"]+scanned["pods"]+scanned["events (core/v1)"]+scanned["events (events.k8s.io/v1)"])/1024,
			len(logs), scanned["operator logs"]/1024, len(places))
	})
}
