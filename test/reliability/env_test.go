//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/test/harness"
)

// figure logs one of a scenario's figures and keeps it for the summary
// TestMain prints at the end.
func figure(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	s.mu.Lock()
	s.figures = append(s.figures, t.Name()+": "+msg)
	s.mu.Unlock()
}

// slowScenario skips a scenario in fast mode (the CI subset).
func slowScenario(t *testing.T) {
	t.Helper()
	if s.fast {
		t.Skip("not in the fast subset (RELIABILITY_FAST=1 / -short); run `make test-reliability` for it")
	}
}

// pick scales a count or a duration: the full value, or the fast one.
func pick[T any](full, fast T) T {
	if s.fast {
		return fast
	}
	return full
}

// randIntn is the suite's seeded randomness (RELIABILITY_SEED).
func randIntn(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Intn(n)
}

// randDuration is uniform in [lo, hi).
func randDuration(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(randIntn(int(hi-lo)/int(time.Millisecond)))*time.Millisecond
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newOperator prepares (does not start) a manager running as the
// operator's ServiceAccount, with its log in DIR/operators/. At the end of
// the test it is stopped and its log checked: no panic, no data race, no
// request refused by RBAC, no "field is immutable".
func (e *suite) newOperator(t *testing.T, name string, metrics bool, args ...string) *harness.Operator {
	t.Helper()
	file := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + name + ".log"
	op := &harness.Operator{
		Bin: e.bin, Kubeconfig: e.opKubeconfig, LogPath: filepath.Join(e.logsDir, file),
		Name: t.Name() + "/" + name, Args: args, Metrics: metrics, ReadyTimeout: 120 * time.Second,
	}
	if err := os.WriteFile(op.LogPath, nil, 0o644); err != nil { // a fresh log per run
		t.Fatal(err)
	}
	e.mu.Lock()
	e.ops = append(e.ops, op)
	e.mu.Unlock()
	t.Cleanup(func() {
		if op.Alive() {
			if err := op.Stop(); err != nil {
				t.Errorf("stopping operator %s: %v", name, err)
			}
		}
		checkOperatorLog(t, op)
	})
	return op
}

// startOperator starts a manager (see newOperator) and waits for /readyz.
func (e *suite) startOperator(t *testing.T, name string, metrics bool, args ...string) *harness.Operator {
	t.Helper()
	op := e.newOperator(t, name, metrics, args...)
	ready, err := op.Start()
	if err != nil {
		t.Fatalf("starting operator %s: %v", name, err)
	}
	t.Logf("operator %s ready in %s (log %s)", name, harness.Secs(ready), op.LogPath)
	return op
}

var (
	rbacDenied = regexp.MustCompile(`is forbidden: User \\?"[^"\\]*\\?" cannot [a-z]+ resource`)
	immutable  = regexp.MustCompile(`field is immutable`)
)

// checkOperatorLog fails the test for what must never be in an operator
// log.
func checkOperatorLog(t *testing.T, op *harness.Operator) {
	t.Helper()
	if bad := op.LogProblems(); bad != "" {
		t.Errorf("operator log %s has: %s", op.LogPath, bad)
	}
	log := op.Log()
	if denied, excused := rbacRefusals(log); len(denied) > 0 {
		t.Errorf("operator log %s: RBAC refused %d request(s) (the generated RBAC is not enough), e.g. %s", op.LogPath, len(denied), denied[0])
	} else if excused > 0 {
		t.Logf("operator log %s: %d request(s) refused by RBAC while the API server was starting (before its /readyz; not a missing permission)", op.LogPath, excused)
	}
	if n := len(immutable.FindAll(log, -1)); n > 0 {
		t.Errorf("operator log %s: %d \"field is immutable\" error(s)", op.LogPath, n)
	}
}

// excuse marks a time window (an API server restart) in which RBAC
// refusals are the API server's own start-up (its authorizer has not
// loaded the roles yet), not missing permissions.
func (e *suite) excuse(from, to time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.excused = append(e.excused, [2]time.Time{from, to})
}

// rbacRefusals returns the log lines where RBAC refused a request, and
// how many more fell in an excused window.
func rbacRefusals(log []byte) (denied []string, excused int) {
	s.mu.Lock()
	windows := append([][2]time.Time(nil), s.excused...)
	s.mu.Unlock()
lines:
	for _, line := range strings.Split(string(log), "\n") {
		m := rbacDenied.FindString(line)
		if m == "" {
			continue
		}
		if f := strings.Fields(line); len(f) > 0 {
			if ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", f[0]); err == nil {
				for _, w := range windows {
					if !ts.Before(w[0]) && !ts.After(w[1]) {
						excused++
						continue lines
					}
				}
			}
		}
		denied = append(denied, m)
	}
	return denied, excused
}

// note says, for a failure, which operators are not running.
func note(ops ...*harness.Operator) func() string {
	return func() string {
		var dead []string
		for _, op := range ops {
			if !op.Alive() {
				dead = append(dead, fmt.Sprintf("%s exited (%v; see %s)", op.Name, op.ExitErr(), op.LogPath))
			}
		}
		if len(dead) == 0 {
			return ""
		}
		return " (" + strings.Join(dead, "; ") + ")"
	}
}

// newNamespace creates a namespace that enforces (and warns about) the
// restricted Pod Security Standard. Unless keep, it is deleted at the end
// of the test (when it failed, it is described first and kept).
func (e *suite) newNamespace(t *testing.T, prefix string, keep bool) string {
	t.Helper()
	return harness.CreateNamespace(t, e.c, prefix, harness.RestrictedLabels, keep, e.describeNamespace)
}

// describeNamespace logs a summary of the Tasks, Jobs and events of a
// namespace.
func (e *suite) describeNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"get", "tasks", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.phase} attempts={.status.attempts} run={.status.currentRun} lastJob={.status.lastJobName} active={.status.active[*].name} lastError={.status.lastError}{\"\\n\"}{end}"},
		{"get", "jobs", "-o", "wide"},
		{"get", "events", "--sort-by=.lastTimestamp", "--field-selector=type=Warning"},
	} {
		out, err := e.cluster.RunKubectl(ctx, append([]string{"-n", ns}, args...)...)
		if len(out) > 20000 {
			out = out[:20000] + "\n...(cut)"
		}
		t.Logf("kubectl -n %s %s (err=%v):\n%s", ns, strings.Join(args[:2], " "), err, out)
	}
}

// create creates an object and fails the test when it cannot.
func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := s.c.Create(ctxFor(t, 30*time.Second), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// createAll creates the Tasks from a few goroutines and returns how long
// it took.
func createAll(t testing.TB, tasks []*v1alpha1.Task) time.Duration {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(tasks))
	work := make(chan *v1alpha1.Task)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := s.c.Create(ctx, task); err != nil {
					errs <- fmt.Errorf("creating Task %s/%s: %w", task.Namespace, task.Name, err)
				}
				cancel()
			}
		}()
	}
	for _, task := range tasks {
		work <- task
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return time.Since(start)
}

// countJobs counts the Jobs of a namespace.
func countJobs(ctx context.Context, ns string) (int, error) {
	var list batchv1.JobList
	err := s.c.List(ctx, &list, client.InNamespace(ns))
	return len(list.Items), err
}

// listTasks reads every Task of a namespace, by name.
func listTasks(ctx context.Context, ns string) (map[string]*v1alpha1.Task, error) {
	var list v1alpha1.TaskList
	if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.Task, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func finalPhase(p v1alpha1.TaskPhase) bool {
	return p == v1alpha1.PhaseSucceeded || p == v1alpha1.PhaseFailed
}

// eventuallyTasks polls check with the Tasks of ns until it holds (see
// harness.Eventually); a failed list is a try that did not hold.
func eventuallyTasks(t *testing.T, limit time.Duration, what string, note func() string, ns string, check func(ctx context.Context, tasks map[string]*v1alpha1.Task) (bool, string)) time.Duration {
	t.Helper()
	return harness.Eventually(t, limit, what, note, func(ctx context.Context) (bool, string) {
		tasks, err := listTasks(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		return check(ctx, tasks)
	})
}

// waitForTasks waits until at least want Tasks of ns satisfy has; the
// progress line says how many do and the phases of all.
func waitForTasks(t *testing.T, limit time.Duration, what string, ns string, op *harness.Operator, want int, has func(*v1alpha1.Task) bool) time.Duration {
	t.Helper()
	return eventuallyTasks(t, limit, what, note(op), ns, func(ctx context.Context, ts map[string]*v1alpha1.Task) (bool, string) {
		k := 0
		for _, task := range ts {
			if has(task) {
				k++
			}
		}
		return k >= want, fmt.Sprintf("%d of %d; %s", k, want, phaseCounts(ts))
	})
}

// phaseCounts summarises Tasks as "Phase=n ...".
func phaseCounts(tasks map[string]*v1alpha1.Task) string {
	counts := map[string]int{}
	for _, task := range tasks {
		p := string(task.Status.Phase)
		if p == "" {
			p = "<none>"
		}
		counts[p]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, " ")
}

// countFinished counts one-shot Tasks in a final phase.
func countFinished(tasks map[string]*v1alpha1.Task) int {
	n := 0
	for _, task := range tasks {
		if finalPhase(task.Status.Phase) {
			n++
		}
	}
	return n
}

// waitFinished waits until the n Tasks of a namespace are Succeeded or
// Failed.
func waitFinished(t *testing.T, ns string, n int, timeout time.Duration, ops ...*harness.Operator) time.Duration {
	t.Helper()
	return eventuallyTasks(t, timeout, fmt.Sprintf("the %d Tasks of %s to finish", n, ns), note(ops...), ns, func(ctx context.Context, tasks map[string]*v1alpha1.Task) (bool, string) {
		return len(tasks) == n && countFinished(tasks) == n, phaseCounts(tasks)
	})
}

// oneShotWant is what a one-shot Task must end as.
type oneShotWant struct {
	phase    v1alpha1.TaskPhase
	attempts int32
}

// checkOneShots checks finished one-shot Tasks against every Job seen in
// their namespace and the Jobs that exist now: at most one Job per
// attempt; Jobs of run 0 only, attempts 1..n without a gap; phase and
// attempts as wanted (attempts <= maxRetry + 1 always); status agreeing with
// the Jobs (attempts, retryCount, history, lastJobName, no active Job). It
// returns the number of Jobs seen.
func checkOneShots(t *testing.T, ns string, seen []batchv1.Job, want map[string]oneShotWant) int {
	t.Helper()
	for k, js := range harness.Duplicates(seen) {
		t.Errorf("%d Jobs for Task %s run %s attempt %s: %v", len(js), k.Task, k.Run, k.Attempt, js)
	}
	var now batchv1.JobList
	if err := s.c.List(ctxFor(t, 30*time.Second), &now, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	existing := map[string]batchv1.Job{}
	for _, j := range now.Items {
		existing[j.Name] = j
	}
	byTask := map[string]map[int]string{} // task -> attempt -> Job name
	for i := range seen {
		k := harness.KeyOf(&seen[i])
		if k.Run != "0" {
			t.Errorf("Job %s of one-shot Task %s is for run %q", seen[i].Name, k.Task, k.Run)
		}
		n, err := strconv.Atoi(k.Attempt)
		if err != nil {
			t.Errorf("Job %s has attempt label %q", seen[i].Name, k.Attempt)
			continue
		}
		if byTask[k.Task] == nil {
			byTask[k.Task] = map[int]string{}
		}
		byTask[k.Task][n] = seen[i].Name
	}
	tasks, err := listTasks(ctxFor(t, 30*time.Second), ns)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for name, w := range want {
		task := tasks[name]
		if task == nil {
			t.Errorf("Task %s is gone", name)
			continue
		}
		st := task.Status
		errs := []string{}
		if st.Phase != w.phase || st.Attempts != w.attempts {
			errs = append(errs, fmt.Sprintf("phase %s attempts %d, want %s %d", st.Phase, st.Attempts, w.phase, w.attempts))
		}
		if st.Attempts > task.Spec.MaxRetry+1 {
			errs = append(errs, fmt.Sprintf("attempts %d > maxRetry+1 = %d", st.Attempts, task.Spec.MaxRetry+1))
		}
		if st.RetryCount != max(st.Attempts-1, 0) {
			errs = append(errs, fmt.Sprintf("retryCount %d with attempts %d", st.RetryCount, st.Attempts))
		}
		jobs := byTask[name]
		for n := 1; n <= int(st.Attempts); n++ {
			if jobs[n] == "" {
				errs = append(errs, fmt.Sprintf("no Job was ever seen for attempt %d", n))
			}
		}
		if len(jobs) != int(st.Attempts) {
			errs = append(errs, fmt.Sprintf("Jobs seen for attempts %v, status says %d attempts", slices.Sorted(maps.Keys(jobs)), st.Attempts))
		}
		if last := jobs[int(st.Attempts)]; last != "" {
			if st.LastJobName != last {
				errs = append(errs, fmt.Sprintf("lastJobName %q, the Job of attempt %d is %q", st.LastJobName, st.Attempts, last))
			}
			if _, ok := existing[last]; !ok {
				errs = append(errs, fmt.Sprintf("the Job of the last attempt, %s, does not exist", last))
			}
		}
		if len(st.Active) != 0 {
			errs = append(errs, fmt.Sprintf("active %v on a finished Task", st.Active))
		}
		if len(st.History) != 1 || st.History[0].RunID != "0" || st.History[0].Attempts != st.Attempts {
			errs = append(errs, fmt.Sprintf("history %+v, want run 0 with %d attempts", st.History, st.Attempts))
		} else {
			want := v1alpha1.RunResultSucceeded
			if w.phase == v1alpha1.PhaseFailed {
				want = v1alpha1.RunResultFailed
			}
			if st.History[0].Result != want {
				errs = append(errs, fmt.Sprintf("history result %s, want %s", st.History[0].Result, want))
			}
		}
		ready, failed := harness.Cond(task, v1alpha1.ConditionReady), harness.Cond(task, v1alpha1.ConditionFailed)
		if w.phase == v1alpha1.PhaseSucceeded && (ready.Status != metav1.ConditionTrue || failed.Status != metav1.ConditionFalse) {
			errs = append(errs, fmt.Sprintf("Succeeded with Ready=%s Failed=%s", ready.Status, failed.Status))
		}
		if w.phase == v1alpha1.PhaseFailed && (ready.Status != metav1.ConditionFalse || failed.Status != metav1.ConditionTrue) {
			errs = append(errs, fmt.Sprintf("Failed with Ready=%s Failed=%s", ready.Status, failed.Status))
		}
		if len(errs) > 0 {
			bad++
			if bad <= 20 {
				t.Errorf("Task %s: %s", name, strings.Join(errs, "; "))
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d Tasks in all did not end as they should", bad)
	}
	return len(seen)
}

// checkMonitor reports the steps backwards a status monitor saw, and how
// many Task versions it looked at.
func checkMonitor(t *testing.T, m *harness.StatusMonitor) int {
	t.Helper()
	m.Check(t)
	return m.Events()
}

// jobsCreatedAfter counts the Jobs seen that were created after at (API
// server timestamps have 1 s resolution: a Job must be created at least a
// full second after at to count).
func jobsCreatedAfter(seen []batchv1.Job, at time.Time) []string {
	var out []string
	for _, j := range seen {
		if j.CreationTimestamp.Time.After(at.Add(time.Second)) {
			out = append(out, fmt.Sprintf("%s (created %s)", j.Name, j.CreationTimestamp.UTC().Format(time.TimeOnly)))
		}
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
