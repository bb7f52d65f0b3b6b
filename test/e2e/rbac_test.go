//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// The roles people bind (config/rbac, contract: "Who can do what"),
// installed as config/default renders them, aggregate into the built-in
// view, edit and admin roles: an edit user runs and cancels Tasks in its
// namespace only and cannot touch TaskQueues; a view user reads but cannot
// trigger. Checked with SubjectAccessReviews and with real requests made as
// those users (impersonated by the admin: the API server authorizes them as
// the users themselves).
func TestTheTaskRolesAggregateIntoViewEditAndAdmin(t *testing.T) {
	t.Parallel()
	installUserRoles(t)
	nsA := newNamespace(t, "e2e-rbac-a")
	nsB := newNamespace(t, "e2e-rbac-b")
	for user, role := range map[string]string{"alice": "edit", "victor": "view", "ada": "admin"} {
		create(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		})
	}

	cases := []struct {
		user, verb, resource, sub, ns string
		allowed                       bool
	}{
		{"alice", "create", "tasks", "", nsA, true},
		{"alice", "patch", "tasks", "", nsA, true}, // run-now, cancel
		{"alice", "delete", "tasks", "", nsA, true},
		{"alice", "get", "tasks", "status", nsA, true},
		{"alice", "create", "tasks", "", nsB, false},
		{"alice", "get", "taskqueues", "", nsA, true},
		{"alice", "create", "taskqueues", "", nsA, false},
		{"alice", "patch", "taskqueues", "", nsA, false},
		{"alice", "patch", "tasks", "status", nsA, false},
		{"victor", "get", "tasks", "", nsA, true},
		{"victor", "list", "tasks", "", nsA, true},
		{"victor", "get", "tasks", "status", nsA, true},
		{"victor", "patch", "tasks", "", nsA, false},
		{"victor", "create", "tasks", "", nsA, false},
		{"ada", "create", "taskqueues", "", nsA, true},
		{"ada", "patch", "taskqueues", "", nsA, true},
		{"ada", "create", "tasks", "", nsA, true},
	}
	// The aggregation controller fills the built-in roles within moments.
	eventually(t, 60*time.Second, "every SubjectAccessReview as expected", func(ctx context.Context) (bool, string) {
		var wrong []string
		for _, c := range cases {
			sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: c.user, Groups: []string{"system:authenticated"},
				ResourceAttributes: &authzv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: v1alpha1.GroupVersion.Group, Resource: c.resource, Subresource: c.sub}}}
			if err := env.c.Create(ctx, sar); err != nil {
				return false, err.Error()
			}
			if sar.Status.Allowed != c.allowed {
				wrong = append(wrong, fmt.Sprintf("%s %s %s/%s in %s: allowed=%v", c.user, c.verb, c.resource, c.sub, c.ns, sar.Status.Allowed))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})

	// Real requests.
	alice, victor, ada := as(t, "alice"), as(t, "victor"), as(t, "ada")
	ctx := ctxFor(t, time.Minute)
	task := testutil.NewTask(nsA, "team-job", testutil.Shell("echo from alice"))
	must(t, alice.Create(ctx, task))
	for _, a := range []string{v1alpha1.AnnotationRunNow, v1alpha1.AnnotationCancel} {
		patch := client.MergeFrom(task.DeepCopy())
		if task.Annotations == nil {
			task.Annotations = map[string]string{}
		}
		task.Annotations[a] = "t1"
		must(t, alice.Patch(ctx, task, patch))
	}
	forbidden(t, "alice creating a Task in another namespace", alice.Create(ctx, testutil.NewTask(nsB, "elsewhere")))
	must(t, ada.Create(ctx, testutil.NewTaskQueue(nsA, "team", 2)))
	forbidden(t, "alice creating a TaskQueue", alice.Create(ctx, testutil.NewTaskQueue(nsA, "mine", 100)))
	tq := &v1alpha1.TaskQueue{}
	must(t, alice.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "team"}, tq))
	resized := tq.DeepCopy()
	resized.Spec.MaxRunning = 100
	forbidden(t, "alice resizing the TaskQueue", alice.Update(ctx, resized))

	read := &v1alpha1.Task{}
	must(t, victor.Get(ctx, client.ObjectKeyFromObject(task), read))
	var list v1alpha1.TaskList
	must(t, victor.List(ctx, &list, client.InNamespace(nsA)))
	patch := client.MergeFrom(read.DeepCopy())
	read.Annotations[v1alpha1.AnnotationRunNow] = "t2"
	forbidden(t, "victor triggering a run", victor.Patch(ctx, read, patch))
	t.Logf("alice (edit) created, triggered and cancelled %s; victor (view) read %d Task(s); ada (admin) created TaskQueue team", task.Name, len(list.Items))
}

// as is a client that acts as user, a member of system:authenticated.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	must(t, err)
	return c
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

// installUserRoles applies the ClusterRoles for people exactly as
// config/default renders them (named task-operator-...).
func installUserRoles(t *testing.T) {
	t.Helper()
	out := kubectl(t, time.Minute, "kustomize", filepath.Join(env.ws.Root, "config", "default"))
	objs, err := testutil.DecodeManifests([]byte(out))
	must(t, err)
	installed := 0
	for _, u := range objs {
		if u.GetKind() != "ClusterRole" || !strings.HasPrefix(u.GetName(), "task-operator-task") {
			continue
		}
		must(t, client.IgnoreAlreadyExists(env.c.Create(ctxFor(t, 10*time.Second), u)))
		installed++
	}
	if installed != 3 {
		t.Fatalf("config/default renders %d ClusterRoles for people, want 3", installed)
	}
}

// The sample ValidatingAdmissionPolicy (config/samples/policies), applied
// as the README says, refuses in a namespace labelled for it a Task whose
// image is outside the allowed registry and one that names a
// ServiceAccount, each with the policy's message; the operator's default
// image and the registry's images pass; other namespaces are untouched.
func TestTheSamplePolicyRestrictsImagesAndServiceAccounts(t *testing.T) {
	t.Parallel()
	policy := filepath.Join(env.ws.Root, "config", "samples", "policies", "restrict-tasks.yaml")
	kubectl(t, time.Minute, "apply", "-f", policy)
	t.Cleanup(func() { _, _ = env.runKubectl(context.Background(), "delete", "-f", policy, "--ignore-not-found") })
	restricted := newNamespace(t, "e2e-policy")
	kubectl(t, 30*time.Second, "label", "namespace", restricted, "taskops.io/restricted=true")
	open := newNamespace(t, "e2e-nopolicy")

	task := func(ns, name string, mutate func(*v1alpha1.Task)) *v1alpha1.Task {
		tk := testutil.NewTask(ns, name)
		mutate(tk)
		return tk
	}
	outside := func(tk *v1alpha1.Task) { tk.Spec.Image = "docker.io/library/busybox:1.37" }
	withSA := func(tk *v1alpha1.Task) { tk.Spec.ServiceAccountName = "builder" }
	dryRun := func(tk *v1alpha1.Task) error {
		return env.c.Create(ctxFor(t, 10*time.Second), tk, client.DryRunAll)
	}
	// The API server compiles a new policy in the background.
	eventually(t, 30*time.Second, "the policy refuses an image outside the registry", func(ctx context.Context) (bool, string) {
		err := dryRun(task(restricted, "outside", outside))
		return err != nil && strings.Contains(err.Error(), "spec.image must come from registry.example.com/team/"), fmt.Sprint(err)
	})
	if err := dryRun(task(restricted, "with-sa", withSA)); err == nil || !strings.Contains(err.Error(), "spec.serviceAccountName is not allowed in this namespace") {
		t.Fatalf("a ServiceAccount: %v", err)
	} else {
		t.Logf("refused as expected: %v", err)
	}
	for _, ok := range []*v1alpha1.Task{
		task(restricted, "registry", func(tk *v1alpha1.Task) { tk.Spec.Image = "registry.example.com/team/tools:1.4" }),
		task(restricted, "default-image", func(*v1alpha1.Task) {}),
		task(open, "elsewhere", func(tk *v1alpha1.Task) { outside(tk); withSA(tk) }),
	} {
		if err := dryRun(ok); err != nil {
			t.Errorf("%s/%s was refused: %v", ok.Namespace, ok.Name, err)
		}
	}
}
