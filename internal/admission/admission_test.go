package admission

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/taskops/task-operator/internal/testutil"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func wait(task string, prio int32, sinceSec int) Waiting {
	return Waiting{Task: task, JobName: task + "-job", Priority: prio, Since: t0.Add(time.Duration(sinceSec) * time.Second)}
}

func names(ws []Waiting) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.Task)
	}
	return out
}

func TestDecide(t *testing.T) {
	active, finished := JobState{}, JobState{Finished: true}
	cases := []struct {
		name         string
		in           Input
		wantAdmitted []string
		wantAdmit    []string
		wantLine     []string
		wantReleased []string
	}{
		{
			name:         "an empty queue admits the waiting attempts up to maxRunning, higher priority first, then first come",
			in:           Input{MaxRunning: 2, Line: LineOf(wait("a", 0, 1), wait("b", 0, 0), wait("c", 5, 9))},
			wantAdmitted: []string{"b-job", "c-job"}, wantAdmit: []string{"c", "b"}, wantLine: []string{"a"},
		},
		{
			name:         "equal priority and time are decided by Job name, the same way every pass",
			in:           Input{MaxRunning: 1, Line: LineOf(wait("z", 0, 0), wait("y", 0, 0))},
			wantAdmitted: []string{"y-job"}, wantAdmit: []string{"y"}, wantLine: []string{"z"},
		},
		{
			name: "an admitted attempt whose Job is not created yet holds its place while its Task waits for it",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"}, Jobs: map[string]JobState{},
				Line: LineOf(wait("a", 0, 0), wait("b", 0, 1))},
			wantAdmitted: []string{"a-job"}, wantLine: []string{"b"},
		},
		{
			name: "a finished Job frees its place for the head of the line",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"}, Jobs: map[string]JobState{"a-job": finished},
				Line: LineOf(wait("b", 0, 1), wait("c", 0, 2))},
			wantAdmitted: []string{"b-job"}, wantAdmit: []string{"b"}, wantLine: []string{"c"}, wantReleased: []string{"a-job"},
		},
		{
			name: "a listed attempt with no Job that no Task waits for any more (cancelled, deleted) frees its place",
			in: Input{MaxRunning: 1, Admitted: []string{"gone-job"}, Jobs: map[string]JobState{},
				Line: LineOf(wait("b", 0, 1))},
			wantAdmitted: []string{"b-job"}, wantAdmit: []string{"b"}, wantReleased: []string{"gone-job"},
		},
		{
			name: "a listed attempt with no Job whose Task this line does not show but the API server does (a record newer than the line) keeps its place",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"}, Jobs: map[string]JobState{},
				Line: LineOf(wait("b", 0, 1)), WaitsUnseen: map[string]bool{"a-job": true}},
			wantAdmitted: []string{"a-job"}, wantLine: []string{"b"},
		},
		{
			name: "lowering maxRunning stops nothing and admits nothing until fewer run",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job", "b-job", "c-job"},
				Jobs: map[string]JobState{"a-job": active, "b-job": active, "c-job": finished},
				Line: LineOf(wait("d", 0, 0))},
			wantAdmitted: []string{"a-job", "b-job"}, wantLine: []string{"d"}, wantReleased: []string{"c-job"},
		},
		{
			name: "an active Job of the queue the record misses holds a place (adopted), even above the cap",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"},
				Jobs: map[string]JobState{"a-job": active, "x-job": active},
				Line: LineOf(wait("d", 0, 0))},
			wantAdmitted: []string{"a-job", "x-job"}, wantLine: []string{"d"},
		},
		{
			name:         "a suspended queue admits nothing",
			in:           Input{MaxRunning: 5, Suspended: true, Line: LineOf(wait("a", 0, 0))},
			wantAdmitted: []string{}, wantLine: []string{"a"},
		},
		{
			name: "a waiting entry whose Job already exists is not admitted again (a Task status behind its Jobs)",
			in: Input{MaxRunning: 5, Jobs: map[string]JobState{"a-job": finished},
				Line: LineOf(wait("a", 0, 0))},
			wantAdmitted: []string{}, wantLine: []string{},
		},
		{
			name: "a waiting entry whose finished Job only a lookup finds is skipped, and the next one admitted",
			in: Input{MaxRunning: 1, Line: LineOf(wait("a", 0, 0), wait("b", 0, 1)),
				Exists: func(job string) bool { return job == "a-job" }},
			wantAdmitted: []string{"b-job"}, wantAdmit: []string{"b"}, wantLine: []string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Admitted == nil {
				d.Admitted = []string{}
			}
			if !slices.Equal(d.Admitted, c.wantAdmitted) {
				t.Errorf("admitted %v, want %v", d.Admitted, c.wantAdmitted)
			}
			if got := names(d.Admit); !slices.Equal(got, orEmpty(c.wantAdmit)) {
				t.Errorf("admit %v, want %v", got, c.wantAdmit)
			}
			if d.Queued != len(c.wantLine) {
				t.Errorf("queued %d, want %d (%v)", d.Queued, len(c.wantLine), c.wantLine)
			}
			if !slices.Equal(d.Released, c.wantReleased) {
				t.Errorf("released %v, want %v", d.Released, c.wantReleased)
			}
			if int(d.Running()) != len(d.Admitted) {
				t.Errorf("running %d, admitted %d", d.Running(), len(d.Admitted))
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// The cap, as a property: whatever the record, Jobs and line, a pass never
// takes a place beyond maxRunning (it may only keep places already held).
func TestDecideNeverAdmitsBeyondTheCap(t *testing.T) {
	for maxRunning := int32(1); maxRunning <= 5; maxRunning++ {
		for held := 0; held <= 7; held++ {
			in := Input{MaxRunning: maxRunning, Jobs: map[string]JobState{}}
			for i := 0; i < held; i++ {
				name := "h" + string(rune('a'+i))
				in.Admitted = append(in.Admitted, name)
				in.Jobs[name] = JobState{}
			}
			var ws []Waiting
			for i := 0; i < 10; i++ {
				ws = append(ws, wait("w"+string(rune('a'+i)), int32(i%3), i))
			}
			in.Line = LineOf(ws...)
			d := Decide(in)
			if len(d.Admit) > 0 && d.Running() > maxRunning {
				t.Fatalf("max %d held %d: admitted %d, running %d", maxRunning, held, len(d.Admit), d.Running())
			}
			if want := max(int(maxRunning)-held, 0); len(d.Admit) != want {
				t.Fatalf("max %d held %d: admitted %d, want %d", maxRunning, held, len(d.Admit), want)
			}
		}
	}
}

// Queued, counted from the head of the line and the few names the pass
// asks about, is what is left when the attempts whose Job exists, those
// holding a place and those admitted now are taken out of the whole line.
func TestQueuedIsTheLineLessWhatWaitsForNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		in := Input{MaxRunning: int32(rng.IntN(6)), Suspended: rng.IntN(5) == 0, Jobs: map[string]JobState{}}
		var ws []Waiting
		for i := range rng.IntN(12) {
			w := wait(fmt.Sprintf("t%d", i), int32(rng.IntN(2)), rng.IntN(4))
			ws = append(ws, w)
			switch rng.IntN(5) {
			case 0: // its Job exists already
				in.Jobs[w.JobName] = JobState{Finished: rng.IntN(2) == 0}
			case 1: // admitted, Job not created yet
				in.Admitted = append(in.Admitted, w.JobName)
			}
		}
		for i := range rng.IntN(4) { // Jobs and record names no Task waits for
			name := fmt.Sprintf("other-%d", i)
			in.Jobs[name] = JobState{Finished: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				in.Admitted = append(in.Admitted, name)
			}
		}
		in.Line = LineOf(ws...)
		d := Decide(in)
		want := 0
		for _, w := range ws {
			if _, exists := in.Jobs[w.JobName]; !exists && !slices.Contains(d.Admitted, w.JobName) {
				want++
			}
		}
		if d.Queued != want {
			t.Fatalf("input %+v: queued %d, want %d (admitted %v)", in, d.Queued, want, d.Admitted)
		}
	}
}

// BenchmarkDecideWaiting measures the decision of a pass in a queue of
// maxRunning 100 with one place just freed (a Job finished), with 100 and
// with 10,000 attempts waiting, interleaved, and reports the second as a
// multiple of the first (issue: a pass over 10k waiting within 2x the
// time of one over 100). The line comes in order (internal/waitline): the
// decision reads only its head.
func BenchmarkDecideWaiting(b *testing.B) {
	input := func(waiting int) Input {
		in := Input{MaxRunning: 100, Jobs: map[string]JobState{}}
		for i := range 100 {
			name := fmt.Sprintf("run-%d", i)
			in.Admitted = append(in.Admitted, name)
			in.Jobs[name] = JobState{Finished: i == 0}
		}
		var ws []Waiting
		for i := range waiting {
			ws = append(ws, wait(fmt.Sprintf("t%05d", i), int32(i%3), i))
		}
		in.Line = LineOf(ws...)
		return in
	}
	small, large := input(100), input(10000)
	testutil.BenchmarkRatio(b, "ns/pass-100-waiting", func() { Decide(small) }, "ns/pass-10k-waiting", func() { Decide(large) })
}
