package admission

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
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
			in:           Input{MaxRunning: 2, Waiting: []Waiting{wait("a", 0, 1), wait("b", 0, 0), wait("c", 5, 9)}},
			wantAdmitted: []string{"b-job", "c-job"}, wantAdmit: []string{"c", "b"}, wantLine: []string{"a"},
		},
		{
			name:         "equal priority and time are decided by Job name, the same way every pass",
			in:           Input{MaxRunning: 1, Waiting: []Waiting{wait("z", 0, 0), wait("y", 0, 0)}},
			wantAdmitted: []string{"y-job"}, wantAdmit: []string{"y"}, wantLine: []string{"z"},
		},
		{
			name: "an admitted attempt whose Job is not created yet holds its place while its Task waits for it",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"}, Jobs: map[string]JobState{},
				Waiting: []Waiting{wait("a", 0, 0), wait("b", 0, 1)}},
			wantAdmitted: []string{"a-job"}, wantLine: []string{"b"},
		},
		{
			name: "a finished Job frees its place for the head of the line",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"}, Jobs: map[string]JobState{"a-job": finished},
				Waiting: []Waiting{wait("b", 0, 1), wait("c", 0, 2)}},
			wantAdmitted: []string{"b-job"}, wantAdmit: []string{"b"}, wantLine: []string{"c"}, wantReleased: []string{"a-job"},
		},
		{
			name: "a listed attempt with no Job that no Task waits for any more (cancelled, deleted) frees its place",
			in: Input{MaxRunning: 1, Admitted: []string{"gone-job"}, Jobs: map[string]JobState{},
				Waiting: []Waiting{wait("b", 0, 1)}},
			wantAdmitted: []string{"b-job"}, wantAdmit: []string{"b"}, wantReleased: []string{"gone-job"},
		},
		{
			name: "lowering maxRunning stops nothing and admits nothing until fewer run",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job", "b-job", "c-job"},
				Jobs:    map[string]JobState{"a-job": active, "b-job": active, "c-job": finished},
				Waiting: []Waiting{wait("d", 0, 0)}},
			wantAdmitted: []string{"a-job", "b-job"}, wantLine: []string{"d"}, wantReleased: []string{"c-job"},
		},
		{
			name: "an active Job of the queue the record misses holds a place (adopted), even above the cap",
			in: Input{MaxRunning: 1, Admitted: []string{"a-job"},
				Jobs:    map[string]JobState{"a-job": active, "x-job": active},
				Waiting: []Waiting{wait("d", 0, 0)}},
			wantAdmitted: []string{"a-job", "x-job"}, wantLine: []string{"d"},
		},
		{
			name:         "a suspended queue admits nothing",
			in:           Input{MaxRunning: 5, Suspended: true, Waiting: []Waiting{wait("a", 0, 0)}},
			wantAdmitted: []string{}, wantLine: []string{"a"},
		},
		{
			name: "a waiting entry whose Job already exists is not admitted again (a Task status behind its Jobs)",
			in: Input{MaxRunning: 5, Jobs: map[string]JobState{"a-job": finished},
				Waiting: []Waiting{wait("a", 0, 0)}},
			wantAdmitted: []string{}, wantLine: []string{},
		},
		{
			name: "a waiting entry whose finished Job only a lookup finds is skipped, and the next one admitted",
			in: Input{MaxRunning: 1, Waiting: []Waiting{wait("a", 0, 0), wait("b", 0, 1)},
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
			if got := slices.Sorted(slices.Values(names(d.Line))); !slices.Equal(got, orEmpty(c.wantLine)) {
				t.Errorf("line %v, want %v", got, c.wantLine)
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
			for i := 0; i < 10; i++ {
				in.Waiting = append(in.Waiting, wait("w"+string(rune('a'+i)), int32(i%3), i))
			}
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

// The first n attempts of a shuffled line, taken in O(W log n), are those
// a full sort puts first, in the same order.
func TestOrderFirstTakesWhatAFullSortPutsFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 3, 10, 100, 1000} {
		for _, n := range []int{1, 2, size / 3, size / 2, size} {
			if n < 1 || n > size {
				continue
			}
			var line []Waiting
			for i := range size {
				line = append(line, wait(fmt.Sprintf("t%04d", i), int32(rng.IntN(3)), rng.IntN(size/2+1)))
			}
			want := slices.Clone(line)
			slices.SortFunc(want, Order)
			orderFirst(line, n)
			if got := names(line[:n]); !slices.Equal(got, names(want[:n])) {
				t.Fatalf("size %d, first %d: %v, want %v", size, n, got, names(want[:n]))
			}
		}
	}
}

// BenchmarkDecideWaiting measures the decision of a pass in a queue of
// maxRunning 100 with one place just freed (a Job finished), with 100 and
// with 10,000 attempts waiting, interleaved, and reports the second as a
// multiple of the first (issue: a pass over 10k waiting within 2x the
// time of one over 100).
func BenchmarkDecideWaiting(b *testing.B) {
	input := func(waiting int) Input {
		in := Input{MaxRunning: 100, Jobs: map[string]JobState{}}
		for i := range 100 {
			name := fmt.Sprintf("run-%d", i)
			in.Admitted = append(in.Admitted, name)
			in.Jobs[name] = JobState{Finished: i == 0}
		}
		for i := range waiting {
			in.Waiting = append(in.Waiting, wait(fmt.Sprintf("t%05d", i), int32(i%3), i))
		}
		return in
	}
	small, large := input(100), input(10000)
	var tSmall, tLarge time.Duration
	for b.Loop() {
		start := time.Now()
		Decide(small)
		mid := time.Now()
		Decide(large)
		tSmall, tLarge = tSmall+mid.Sub(start), tLarge+time.Since(mid)
	}
	b.ReportMetric(float64(tSmall.Nanoseconds())/float64(b.N), "ns/pass-100-waiting")
	b.ReportMetric(float64(tLarge.Nanoseconds())/float64(b.N), "ns/pass-10k-waiting")
	b.ReportMetric(float64(tLarge)/float64(tSmall), "x")
}
