package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// These tests check the harness's arithmetic and parsers; they measure and
// time nothing.

func TestPercentileAndMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {1, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := harness.Median(xs); got != 5.5 {
		t.Errorf("median = %v, want 5.5", got)
	}
	if !math.IsNaN(percentile(nil, 50)) || !math.IsNaN(harness.Median(nil)) {
		t.Error("percentile and median of nothing should be NaN")
	}
	if got := spread([]float64{2, 1, 3}, "s"); got != "2 s [1-3]" {
		t.Errorf("spread = %q", got)
	}
	if got := spread3([]float64{4.001}, ""); got != "4.001" {
		t.Errorf("spread3 = %q", got)
	}
	if got := spread([]float64{math.NaN()}, "s"); got != "n/a" {
		t.Errorf("spread of NaN = %q", got)
	}
}

const apiMetricsSample = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="status",verb="PUT",version="v1"} 3000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch.taskops.io",resource="tasks",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2000
apiserver_request_total{code="409",component="apiserver",dry_run="",group="batch.taskops.io",resource="tasks",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="LIST",version="v1"} 17
weird_metric{path="a \"quoted\" \\ value",x="y"} 1.5e+03
process_resident_memory_bytes 4.2e+07
`

func TestParseMetrics(t *testing.T) {
	m, err := harness.ParseMetrics(strings.NewReader(apiMetricsSample))
	if err != nil {
		t.Fatal(err)
	}
	w := apiWrites(m)
	want := map[string]float64{"jobs": 1000, "jobs/status": 3000, "tasks/status": 2003}
	for k, v := range want {
		if w[k] != v {
			t.Errorf("apiWrites[%s] = %v, want %v", k, w[k], v)
		}
	}
	if len(w) != len(want) {
		t.Errorf("apiWrites = %v, want only %v (reads are not writes)", w, want)
	}
	if c := apiConflicts(m)["tasks/status"]; c != 3 {
		t.Errorf("conflicts = %v, want 3", c)
	}
	if v := m.Value("process_resident_memory_bytes"); v != 42e6 {
		t.Errorf("RSS = %v", v)
	}
	if v := m.Sum("weird_metric", func(l map[string]string) bool { return l["path"] == `a "quoted" \ value` }); v != 1500 {
		t.Errorf("escaped label: %v", v)
	}
	before := map[string]float64{"jobs": 10, "tasks": 5}
	after := map[string]float64{"jobs": 15, "tasks": 5, "events": 2}
	d := diffMap(before, after)
	if d["jobs"] != 5 || d["events"] != 2 || len(d) != 2 {
		t.Errorf("diffMap = %v", d)
	}
}

func TestOperatorWritesFromMetrics(t *testing.T) {
	parse := func(s string) metrics {
		m, err := harness.ParseMetrics(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := writeSnap{
		api: parse(`apiserver_request_total{resource="tasks",subresource="",verb="POST",code="201"} 0`),
		op:  parse(`rest_client_requests_total{code="201",host="h",method="POST"} 0`),
	}
	after := writeSnap{
		api: parse(`apiserver_request_total{resource="tasks",subresource="",verb="POST",code="201"} 100
apiserver_request_total{resource="tasks",subresource="",verb="PATCH",code="200"} 100
apiserver_request_total{resource="tasks",subresource="status",verb="PATCH",code="200"} 200
apiserver_request_total{resource="jobs",subresource="",verb="POST",code="201"} 100
apiserver_request_total{resource="jobs",subresource="status",verb="PUT",code="200"} 300
apiserver_request_total{resource="events",subresource="",verb="POST",code="201"} 900`),
		op: parse(`rest_client_requests_total{code="201",host="h",method="POST"} 300
rest_client_requests_total{code="200",host="h",method="PATCH"} 300
rest_client_requests_total{code="200",host="h",method="GET"} 50`),
	}
	w, err := operatorWrites(&cluster{}, before, after, map[string]float64{"tasks": 100})
	if err != nil {
		t.Fatal(err)
	}
	// 600 operator writes: 100 finalizer patches, 200 status patches, 100
	// Job creates, and so 200 events.
	if w.total() != 400 || w.events != 200 || w.core["tasks"] != 100 || w.core["jobs/status"] != 0 {
		t.Errorf("writes = %+v (total %v)", w, w.total())
	}
}

func auditLine(stage, verb, ua, user, resource, sub string, code int, at time.Time) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"` + stage +
		`","requestURI":"/x","verb":"` + verb + `","user":{"username":"` + user + `","groups":["system:masters"]},"userAgent":"` + ua +
		`","objectRef":{"resource":"` + resource + `","namespace":"bench","subresource":"` + sub + `"},"responseStatus":{"metadata":{},"code":` +
		strconv.Itoa(code) + `},"requestReceivedTimestamp":"` + at.UTC().Format(time.RFC3339Nano) + `","stageTimestamp":"` + at.UTC().Format(time.RFC3339Nano) + `"}`
}

func TestCountAudit(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	op := "manager/v0.0.0 (linux/amd64) kubernetes/$Format"
	lines := []string{
		auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, t0.Add(time.Second)),
		auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 200, t0.Add(2*time.Second)),
		auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 409, t0.Add(2*time.Second)),
		auditLine("ResponseComplete", "create", op, "kubernetes-admin", "events", "", 201, t0.Add(3*time.Second)),
		auditLine("ResponseComplete", "update", op, "kubernetes-admin", "leases", "", 200, t0.Add(3*time.Second)),
		auditLine("ResponseStarted", "create", op, "kubernetes-admin", "jobs", "", 201, t0.Add(time.Second)),
		auditLine("ResponseComplete", "get", op, "kubernetes-admin", "jobs", "", 200, t0.Add(time.Second)),
		auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, t0.Add(-time.Second)),
		auditLine("ResponseComplete", "create", "kube-controller-manager/v1.37.2", cronJobControllerUser, "jobs", "", 201, t0.Add(time.Second)),
		auditLine("ResponseComplete", "update", "kube-controller-manager/v1.37.2", "system:serviceaccount:kube-system:job-controller", "jobs", "status", 200, t0.Add(time.Second)),
		`not json`,
	}
	c, err := countAudit(strings.NewReader(strings.Join(lines, "\n")), t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"jobs": 1, "tasks/status": 2, "events": 1, "leases": 1, conflictPrefix + "tasks/status": 1, readPrefix + "jobs": 1}
	if len(c[actorOperator]) != len(want) {
		t.Errorf("operator counts = %v, want %v", c[actorOperator], want)
	}
	for k, v := range want {
		if c[actorOperator][k] != v {
			t.Errorf("operator %s = %v, want %v", k, c[actorOperator][k], v)
		}
	}
	if c[actorCronJob]["jobs"] != 1 || c[actorOther]["jobs/status"] != 1 {
		t.Errorf("cronjob/other counts = %v / %v", c[actorCronJob], c[actorOther])
	}
}

// TestAuditPolicyOnAPIServer runs a real kube-apiserver with
// hack/bench-audit-policy.yaml and checks that the log it writes is what
// countAudit reads: writes and reads attributed by user agent. It
// needs KUBEBUILDER_ASSETS (make test sets it).
func TestAuditPolicyOnAPIServer(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set (make test sets it)")
	}
	root := testutil.RepoRoot()
	logPath := filepath.Join(t.TempDir(), "audit.log")
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", filepath.Join(root, "hack/bench-audit-policy.yaml")).
		Set("audit-log-path", logPath)
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	newClient := func(ua string) client.Client {
		c := rest.CopyConfig(cfg)
		c.UserAgent = ua
		cl, err := client.New(c, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	opc := newClient("manager/v0.0.0 (linux/amd64) kubernetes/$Format")
	other := newClient("task-operator-bench")
	if err := other.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		t.Fatal(err)
	}
	owner := oneShotTask("bench", "owner")
	owner.UID = "0d4f3c1e-0000-4000-8000-000000000001"
	job := b0Job(owner, 0)
	job.OwnerReferences = nil
	if err := opc.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := opc.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Annotations["bench"] = "x"
	if err := opc.Patch(ctx, job, patch); err != nil {
		t.Fatal(err)
	}
	if err := opc.Delete(ctx, job); err != nil {
		t.Fatal(err)
	}
	var counts auditCounts
	err = poll(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		counts, err = countAuditFile(logPath, from, time.Now().Add(time.Second))
		return err == nil && counts[actorOperator]["jobs"] == 3 && counts[actorOperator][readPrefix+"jobs"] == 1, nil
	})
	if err != nil {
		t.Fatalf("operator writes in the audit log: %v (counts %v)", err, counts)
	}
	if counts[actorOther]["namespaces"] != 1 {
		t.Errorf("the namespace create is missing: %v", counts)
	}
}

func TestJobCreateCostIsTheMeanServerTimeOfTheCreatesAndTheReactingWritesPerCreate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	op := "manager/v0.0.0 (linux/amd64) kubernetes/$Format"
	took := func(line string, d time.Duration, at time.Time) string {
		return strings.Replace(line, `"stageTimestamp":"`+at.UTC().Format(time.RFC3339Nano)+`"`, `"stageTimestamp":"`+at.Add(d).UTC().Format(time.RFC3339Nano)+`"`, 1)
	}
	at := t0.Add(time.Second)
	lines := []string{
		took(auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, at), 40*time.Millisecond, at),
		took(auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, at), 80*time.Millisecond, at),
		auditLine("ResponseComplete", "create", "kube-controller-manager/v1.37.2", "system:serviceaccount:kube-system:job-controller", "pods", "", 201, at),
		auditLine("ResponseComplete", "create", "kube-scheduler/v1.37.2", "system:kube-scheduler", "pods", "binding", 201, at),
		auditLine("ResponseComplete", "patch", "kwok/v0.7.0", "kwok", "pods", "status", 200, at),
		auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 200, at),             // the operator: not reacting
		auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, t0.Add(-time.Second)), // before the window
		auditLine("ResponseStarted", "create", op, "kubernetes-admin", "jobs", "", 201, at),                    // not the response
	}
	c, err := jobCreateCostIn(strings.NewReader(strings.Join(lines, "\n")), "bench", t0, t0.Add(time.Minute))
	if err != nil || !c.known {
		t.Fatalf("known %v, err %v", c.known, err)
	}
	if c.serverMS < 59.9 || c.serverMS > 60.1 || c.reacting != 1.5 {
		t.Errorf("cost = %+v, want 60 ms and 1.5 reacting writes per create", c)
	}
	if c, _ := jobCreateCostIn(strings.NewReader(strings.Join(lines, "\n")), "other", t0, t0.Add(time.Minute)); c.known {
		t.Error("a namespace without creates has a cost")
	}
}

func TestCumulativeOfReadsTheCumColumnOfTheFrame(t *testing.T) {
	top := []byte(`File: manager
Type: alloc_space
Showing nodes accounting for 15.34MB, 1.37% of 1121.75MB total
      flat  flat%   sum%        cum   cum%
         0     0%     0%  16081212B  1.37%  github.com/taskops/task-operator/internal/taskqueue.(*Reconciler).Reconcile
   1000000B 0.089% 0.089%  14500000B  1.23%  github.com/taskops/task-operator/internal/taskqueue.(*Reconciler).observe
`)
	for _, c := range []struct {
		frame string
		want  float64
	}{
		{queueReconcile, 16081212},
		{"taskqueue.(*Reconciler).observe", 14500000},
		{"reconciler.(*TaskReconciler).Reconcile", 0}, // absent: nothing sampled
	} {
		got, err := cumulativeOf(top, c.frame)
		if err != nil || got != c.want {
			t.Errorf("cumulativeOf(%s) = %v, %v; want %v", c.frame, got, err, c.want)
		}
	}
	cpu := []byte("      flat  flat%   sum%        cum   cum%\n  10000000ns  1%  1%  250000000ns 25%  github.com/taskops/task-operator/internal/taskqueue.(*Reconciler).Reconcile\n")
	if got, err := cumulativeOf(cpu, queueReconcile); err != nil || got != 250000000 {
		t.Errorf("CPU in ns: got %v, %v", got, err)
	}
}

func TestOperatorWritesByTaskCountsATasksOwnWritesAndItsJobsByName(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	op := "manager/v0.0.0 (linux/amd64) kubernetes/$Format"
	at := t0.Add(time.Second)
	named := func(line, name string) string {
		return strings.Replace(line, `"namespace":"bench"`, `"namespace":"bench","name":"`+name+`"`, 1)
	}
	lines := []string{
		named(auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, at), "short-00001-0-1"),
		named(auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 200, at), "short-00001"),
		named(auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "", 200, at), "short-00001"),
		named(auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 200, at), "short-00002"),
		named(auditLine("ResponseComplete", "create", op, "kubernetes-admin", "events", "", 201, at), "short-00001.x"),             // an event: not counted
		named(auditLine("ResponseComplete", "create", op, "kubernetes-admin", "jobs", "", 201, at), "burst-00001-0-1"),             // another Task's Job
		named(auditLine("ResponseComplete", "get", op, "kubernetes-admin", "tasks", "", 200, at), "short-00001"),                   // a read
		named(auditLine("ResponseComplete", "patch", "kube-controller-manager/v1.37.2", "x", "tasks", "", 200, at), "short-00002"), // not the operator
		named(auditLine("ResponseComplete", "patch", op, "kubernetes-admin", "tasks", "status", 200, t0.Add(-time.Second)), "short-00002"),
	}
	got, err := operatorWritesByTask(strings.NewReader(strings.Join(lines, "\n")), "bench", map[string]string{"short-00001-0-1": "short-00001"}, t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"short-00001": 3, "short-00002": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("writes by Task = %v, want %v", got, want)
	}
}

func TestTheTrackerCountsRunsFinishedAndCronJobsThatRecordedTheSlot(t *testing.T) {
	tr := newTracker()
	slot := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	task := func(name string, results ...v1alpha1.RunResult) *v1alpha1.Task {
		tk := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, r := range results {
			tk.Status.History = append(tk.Status.History, v1alpha1.RunRecord{RunID: "s1", Result: r})
		}
		return tk
	}
	tr.observe(task("a", v1alpha1.RunResultRunning))
	tr.observe(task("b", v1alpha1.RunResultSucceeded))
	tr.observe(task("c"))
	if n, last := tr.runsFinished("s1"); n != 1 || last.IsZero() {
		t.Errorf("runsFinished = %d, %v; want 1 and a time", n, last)
	}
	tr.observe(task("a", v1alpha1.RunResultFailed))
	if n, _ := tr.runsFinished("s1"); n != 2 {
		t.Errorf("runsFinished after a's end = %d, want 2", n)
	}

	cj := func(name string, active int, last time.Time) *batchv1.CronJob {
		c := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for range active {
			c.Status.Active = append(c.Status.Active, corev1.ObjectReference{Name: "j"})
		}
		if !last.IsZero() {
			c.Status.LastSuccessfulTime = &metav1.Time{Time: last}
		}
		return c
	}
	tr.observe(cj("x", 1, time.Time{}))              // running
	tr.observe(cj("y", 0, slot.Add(-time.Hour)))     // an earlier slot's success
	tr.observe(cj("z", 0, slot.Add(30*time.Second))) // this slot's, recorded
	tr.observe(cj("w", 1, slot.Add(30*time.Second))) // succeeded, still active
	if n, last := tr.cronJobsDone(slot); n != 1 || last.IsZero() {
		t.Errorf("cronJobsDone = %d, %v; want 1 and a time", n, last)
	}
}

// A Task is in line once the benchmark saw its place written
// (status.queued) or a Job of it (admitted before the tracker saw it
// wait); a Task with neither is not.
func TestTheTrackerCountsTheTasksInLine(t *testing.T) {
	tr := newTracker()
	waiting := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}
	waiting.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: "once", Attempt: 1, JobName: "waiting-1"}}
	tr.observe(waiting)
	tr.observe(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Name: "admitted"}})
	tr.observe(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Name: "arrived"}})
	tr.observe(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "admitted-1", Labels: map[string]string{v1alpha1.LabelTask: "admitted"}}})
	if got := tr.lined(); got != 2 {
		t.Fatalf("lined = %d, want 2 (the Task waiting and the one with a Job, not the one just arrived)", got)
	}
	waiting.Status.Queued = nil // admitted since: still counted
	tr.observe(waiting)
	if got := tr.lined(); got != 2 {
		t.Fatalf("lined after the waiting Task left the line = %d, want 2", got)
	}
}

// An admission pairs the k-th Job created after the first `parallel`
// with the k-th completion; the long line's second window keeps only the
// Jobs created in it.
func TestAdmissionsPairCreatesWithTheCompletionsThatFreedTheirPlaces(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	jobs := map[string]jobTrack{
		"a": {seen: at(0), complete: at(1)},
		"b": {seen: at(0), complete: at(2)},
		"c": {seen: at(1.5), complete: at(3)}, // the place a freed at 1
		"d": {seen: at(2.25), complete: at(4)},
		"e": {seen: at(3.5)},
	}
	var got []float64
	for _, a := range admissions(jobs, 2) {
		got = append(got, a.latency)
	}
	if want := []float64{0.5, 0.25, 0.5}; !slices.Equal(got, want) {
		t.Fatalf("admission latencies %v, want %v", got, want)
	}
	if got, want := admissionsBetween(jobs, 2, at(2), at(3.5)), []float64{0.25, 0.5}; !slices.Equal(got, want) {
		t.Fatalf("admissions created in [2 s, 3.5 s]: %v, want %v", got, want)
	}
	if most, admit := activeAndAdmission(jobs, 2); most != 2 || len(admit) != 3 {
		t.Fatalf("activeAndAdmission: most %d (want 2), %d admissions (want 3)", most, len(admit))
	}
}
