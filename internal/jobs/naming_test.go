package jobs

import (
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// newTask is a valid one-shot shell Task; opts adjust it.
func newTask(opts ...func(*v1alpha1.Task)) *v1alpha1.Task {
	t := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{
			Name:       "backup",
			Namespace:  "team-a",
			UID:        types.UID("6f1c1d2e-0000-4000-8000-000000000001"),
			Generation: 3,
		},
		Spec: v1alpha1.TaskSpec{
			Type:     v1alpha1.TaskTypeShell,
			Shell:    "echo hello",
			Replicas: 1,
		},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func withName(name string) func(*v1alpha1.Task) {
	return func(t *v1alpha1.Task) { t.Name = name }
}

func withUID(uid string) func(*v1alpha1.Task) {
	return func(t *v1alpha1.Task) { t.UID = types.UID(uid) }
}

// name63 is the longest Task name admission accepts.
var name63 = strings.Repeat("a", 30) + "-" + strings.Repeat("b", 32)

func TestNameIsAValidLabelOfAtMost60Characters(t *testing.T) {
	tests := []struct {
		name    string
		task    string
		runID   string
		attempt int32
	}{
		{"a 63-character task name with the one-shot run", name63, runs.OneShot, 101},
		{"a 63-character task name with a scheduled run", name63, "s1767225600", 101},
		{"a 63-character task name with a run-now run", name63, "m0123456789", 101},
		{"a task name truncated right after a dash", strings.Repeat("a", 37) + "-" + strings.Repeat("b", 25), "m0123456789", 101},
		{"a task name made of one-character groups", strings.Repeat("a-", 31) + "a", "s1767225600", 1},
		{"a short task name", "x", runs.OneShot, 1},
		{"a task name with dots that bypassed admission", "my.task.example.com", runs.OneShot, 1},
		{"an empty task name", "", runs.OneShot, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Name(newTask(withName(tt.task)), tt.runID, tt.attempt)
			if len(got) > 60 {
				t.Errorf("Name() = %q has %d characters, want <= 60", got, len(got))
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("Name() = %q is not a DNS-1123 label: %v", got, errs)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("Name() = %q is not a DNS-1123 subdomain: %v", got, errs)
			}
			// An Indexed Job's pod hostname is <job name>-<index>, index <= 99.
			if errs := validation.IsDNS1123Label(got + "-99"); len(errs) > 0 {
				t.Errorf("hostname %q-99 is not a DNS-1123 label: %v", got, errs)
			}
			suffix := "-" + tt.runID + "-" + strconv.Itoa(int(tt.attempt))
			if !strings.HasSuffix(got, suffix) {
				t.Errorf("Name() = %q does not end with %q", got, suffix)
			}
		})
	}
}

func TestNameShape(t *testing.T) {
	task := newTask()
	hash := uidHash(task)
	cut := newTask(withName(strings.Repeat("a", 30) + "-" + strings.Repeat("b", 32)))

	tests := []struct {
		name string
		got  string
		want string
	}{
		{"a short name is task name, uid hash, run id and attempt", Name(task, "s1767225600", 2), "backup-" + hash + "-s1767225600-2"},
		{"only the task name part is cut, its trailing dash dropped, and the hash of its whole name and uid is long", Name(cut, "m0123456789", 101), strings.Repeat("a", 30) + "-" + cutHash(cut) + "-m0123456789-101"},
		{"the legacy name of a cut task kept the short uid hash", LegacyName(cut, "m0123456789", 101), strings.Repeat("a", 30) + "-" + strings.Repeat("b", 7) + "-" + hash + "-m0123456789-101"},
		{"the legacy name of a task whose name fits is its name", LegacyName(task, "s1767225600", 2), Name(task, "s1767225600", 2)},
		{"an empty task name leaves hash, run id and attempt", Name(newTask(withName("")), "0", 1), hash + "-0-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if len(hash) != 5 {
		t.Errorf("uid hash %q has %d characters, want 5", hash, len(hash))
	}
}

func TestNamesAreStableAndDistinct(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"the same task, run and attempt give the same name", Name(newTask(), "s1767225600", 1), Name(newTask(), "s1767225600", 1), true},
		{"a re-created task with a new uid gets a different name", Name(newTask(), "s1767225600", 1), Name(newTask(withUID("6f1c1d2e-0000-4000-8000-000000000002")), "s1767225600", 1), false},
		{"another run gets a different name", Name(newTask(), "s1767225600", 1), Name(newTask(), "s1767229200", 1), false},
		{"another attempt gets a different name", Name(newTask(), "s1767225600", 1), Name(newTask(), "s1767225600", 2), false},
		{"run s1 attempt 11 and run s11 attempt 1 stay distinct", Name(newTask(), "s1", 11), Name(newTask(), "s11", 1), false},
		{"long task names that differ only past the cut differ by their uid hash", Name(newTask(withName(name63), withUID("u1")), "0", 1), Name(newTask(withName(name63[:62]+"c"), withUID("u2")), "0", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.a == tt.b) != tt.same {
				t.Errorf("names %q and %q: same = %v, want %v", tt.a, tt.b, tt.a == tt.b, tt.same)
			}
		})
	}
}

// Tasks whose names share the part a Job name keeps (generated CI names)
// get distinct Job names: 100,000 of them in one namespace, each with its
// own UID, collide nowhere (a 20-bit hash made a collision likely from a
// few hundred on).
func TestCutNamesDoNotCollideAt100kTasks(t *testing.T) {
	const n = 100_000
	seen := make(map[string]int, n)
	for i := range n {
		task := newTask(withName("ci-build-pipeline-for-the-billing-service-run-"+strconv.Itoa(i)), withUID("6f1c1d2e-0000-4000-8000-"+strconv.Itoa(1_000_000_000_000+i)))
		for _, run := range []string{runs.OneShot, "s1767225600"} {
			name := Name(task, run, 1)
			if j, dup := seen[name]; dup {
				t.Fatalf("tasks %d and %d share Job name %q", j, i, name)
			}
			seen[name] = i
		}
	}
}

// Names lists the legacy name of a cut Task's Job after its name, and
// nothing else for a Task whose name fits.
func TestNamesIncludeTheLegacyNameOnlyWhenItDiffers(t *testing.T) {
	if got := Names(newTask(), "0", 1); len(got) != 1 {
		t.Errorf("names of a short task %v", got)
	}
	cut := newTask(withName(name63))
	if got := Names(cut, "0", 1); len(got) != 2 || got[0] != Name(cut, "0", 1) || got[1] != LegacyName(cut, "0", 1) {
		t.Errorf("names of a cut task %v", got)
	}
}

// A Job name reads back into its Task's name when the whole name is in
// it, and Owns tells a Task's own Jobs from those of a Task re-created
// under the same name or of another Task.
func TestAJobNameLeadsBackToItsTask(t *testing.T) {
	task := newTask(withName("nightly-report"))
	recreated := newTask(withName("nightly-report"), withUID("6f1c1d2e-0000-4000-8000-000000000002"))
	cut := newTask(withName(name63))
	tests := []struct {
		name     string
		job      string
		wantTask string // "": cannot be read back
		owner    *v1alpha1.Task
		owns     bool
	}{
		{"a whole name reads back, dashes and all", Name(task, "s1767225600", 2), "nightly-report", task, true},
		{"a run-now run's Job too", Name(task, "m0123456789", 1), "nightly-report", task, true},
		{"a Task re-created under the name does not own its predecessor's Job", Name(task, "0", 1), "nightly-report", recreated, false},
		{"a cut name cannot be read back; its Task owns it", Name(cut, "0", 1), "", cut, true},
		{"a cut Task's legacy name reads back as its cut part only; the Task owns it", LegacyName(cut, "0", 3), strings.TrimSuffix(LegacyName(cut, "0", 3), "-"+uidHash(cut)+"-0-3"), cut, true},
		{"another Task's Job is not this one's", Name(newTask(withName("other")), "0", 1), "other", task, false},
		{"a name that is not a Job name", "nightly", "", task, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TaskOf(tt.job)
			if want := tt.wantTask != ""; ok != want || got != tt.wantTask {
				t.Errorf("TaskOf(%q) = %q, %v; want %q, %v", tt.job, got, ok, tt.wantTask, want)
			}
			if o := Owns(tt.owner, tt.job); o != tt.owns {
				t.Errorf("Owns(%s, %q) = %v, want %v", tt.owner.Name, tt.job, o, tt.owns)
			}
		})
	}
}
