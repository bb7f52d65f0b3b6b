package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// slotsBetween lists the slots in (from, to] by Next.
func slotsBetween(s *Schedule, from, to time.Time) []string {
	var out []string
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t.UTC().Format("2006-01-02T15:04Z"))
		if len(out) > 200 {
			break
		}
	}
	return out
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Both daylight-saving transitions in three zones, under each policy.
func TestDaylightSavingPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, zone, expr string
		day              string // the local day listed, YYYY-MM-DD
		once, runAfter   bool
		want             []string
	}{
		{name: "Berlin fall back, Twice: 02:30 twice", zone: "Europe/Berlin", expr: "30 2 * * *", day: "2024-10-27",
			want: []string{"2024-10-27T00:30Z", "2024-10-27T01:30Z"}},
		{name: "Berlin fall back, Once: 02:30 at its first occurrence", zone: "Europe/Berlin", expr: "30 2 * * *", day: "2024-10-27", once: true,
			want: []string{"2024-10-27T00:30Z"}},
		{name: "Berlin spring forward, Skip: no 02:30", zone: "Europe/Berlin", expr: "30 2 * * *", day: "2024-03-31", once: true,
			want: nil},
		{name: "Berlin spring forward, RunAfter: at 03:00, the first instant after the gap", zone: "Europe/Berlin", expr: "30 2 * * *", day: "2024-03-31", once: true, runAfter: true,
			want: []string{"2024-03-31T01:00Z"}},
		{name: "New York fall back, Twice: 01:30 twice", zone: "America/New_York", expr: "30 1 * * *", day: "2024-11-03",
			want: []string{"2024-11-03T05:30Z", "2024-11-03T06:30Z"}},
		{name: "New York fall back, Once", zone: "America/New_York", expr: "30 1 * * *", day: "2024-11-03", once: true,
			want: []string{"2024-11-03T05:30Z"}},
		{name: "New York spring forward, RunAfter", zone: "America/New_York", expr: "30 2 * * *", day: "2024-03-10", runAfter: true,
			want: []string{"2024-03-10T07:00Z"}},
		{name: "New York spring forward, RunAfter adds nothing where the instant after the gap is a slot anyway", zone: "America/New_York", expr: "*/30 2-3 * * *", day: "2024-03-10", runAfter: true,
			want: []string{"2024-03-10T07:00Z", "2024-03-10T07:30Z"}},
		{name: "Lord Howe fall back by 30 minutes, Twice: 01:45 twice", zone: "Australia/Lord_Howe", expr: "45 1 * * *", day: "2024-04-07",
			want: []string{"2024-04-06T14:45Z", "2024-04-06T15:15Z"}},
		{name: "Lord Howe fall back by 30 minutes, Once", zone: "Australia/Lord_Howe", expr: "45 1 * * *", day: "2024-04-07", once: true,
			want: []string{"2024-04-06T14:45Z"}},
		{name: "Lord Howe spring forward by 30 minutes, Skip: no 02:15", zone: "Australia/Lord_Howe", expr: "15 2 * * *", day: "2024-10-06",
			want: nil},
		{name: "Lord Howe spring forward by 30 minutes, RunAfter: at 02:30", zone: "Australia/Lord_Howe", expr: "15 2 * * *", day: "2024-10-06", runAfter: true,
			want: []string{"2024-10-05T15:30Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := mustZone(t, tc.zone)
			s, err := Parse(tc.expr, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			s = s.WithCalendar(Calendar{Once: tc.once, RunAfter: tc.runAfter})
			day, _ := time.ParseInLocation("2006-01-02", tc.day, loc)
			from, to := day.Add(-time.Second), time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc).Add(-time.Second)
			got := slotsBetween(s, from, to)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("slots of %s (-want +got):\n%s", tc.day, d)
			}
			// Due agrees with Next: the newest slot of the day, and the
			// others of the day missed.
			slots := s.Due(from, nil, to)
			if len(tc.want) == 0 {
				if !slots.Due.IsZero() {
					t.Errorf("Due %s, want none", slots.Due)
				}
				return
			}
			if got := slots.Due.UTC().Format("2006-01-02T15:04Z"); got != tc.want[len(tc.want)-1] || slots.Missed != int64(len(tc.want)-1) {
				t.Errorf("Due %s missed %d, want %s missed %d", got, slots.Missed, tc.want[len(tc.want)-1], len(tc.want)-1)
			}
		})
	}
}

func TestAnHourlyScheduleOnAFallBackDayHas24SlotsUnderOnce(t *testing.T) {
	loc := mustZone(t, "America/New_York")
	s, err := Parse("0 * * * *", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2024, 11, 3, 0, 0, 0, 0, loc).Add(-time.Second)
	to := time.Date(2024, 11, 4, 0, 0, 0, 0, loc).Add(-time.Second)
	if n := len(slotsBetween(s.WithCalendar(Calendar{Once: true}), from, to)); n != 24 {
		t.Errorf("Once: %d slots, want 24", n)
	}
	if n := len(slotsBetween(s.WithCalendar(Calendar{}), from, to)); n != 25 {
		t.Errorf("Twice: %d slots, want 25", n)
	}
	if got := s.WithCalendar(Calendar{Once: true}).Due(from, nil, to); got.Missed != 23 {
		t.Errorf("Once: Due missed %d, want 23", got.Missed)
	}
}

func TestSkipDates(t *testing.T) {
	loc := mustZone(t, "Europe/Berlin")
	var cal Calendar
	if problems := cal.AddDates([]string{"2024-12-25", "--01-01", "# a comment", "", " 2024-12-26 "}); len(problems) > 0 {
		t.Fatal(problems)
	}
	if problems := cal.AddDates([]string{"2024-13-01", "12/24", "--02-30", "--02-29"}); len(problems) != 3 {
		t.Errorf("problems %v, want three bad entries named", problems)
	}
	cal.Once = true
	s, err := Parse("0 9 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s = s.WithCalendar(cal)
	from := time.Date(2024, 12, 23, 12, 0, 0, 0, loc)
	got := slotsBetween(s, from, time.Date(2025, 1, 3, 0, 0, 0, 0, loc))
	want := []string{"2024-12-24T08:00Z", "2024-12-27T08:00Z", "2024-12-28T08:00Z", "2024-12-29T08:00Z", "2024-12-30T08:00Z", "2024-12-31T08:00Z", "2025-01-02T08:00Z"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("slots (-want +got):\n%s", d)
	}

	// A slot on a skip date falls due, flagged, neither run nor missed; Next
	// is the next slot that runs.
	due := s.Due(time.Date(2024, 12, 25, 8, 0, 0, 0, loc), nil, time.Date(2024, 12, 25, 9, 0, 30, 0, loc))
	if !due.SkipDate || due.Missed != 0 || !due.Next.Equal(time.Date(2024, 12, 27, 9, 0, 0, 0, loc)) {
		t.Errorf("Due on a skip date: %+v", due)
	}
	// The pass before a skip date wakes for its slot, to record the skip.
	before := s.Due(time.Date(2024, 12, 24, 9, 0, 0, 0, loc), nil, time.Date(2024, 12, 24, 10, 0, 0, 0, loc))
	if want := time.Date(2024, 12, 25, 9, 0, 0, 0, loc); !before.Wake().Equal(want) || !before.Next.Equal(time.Date(2024, 12, 27, 9, 0, 0, 0, loc)) {
		t.Errorf("before the holidays: wake %s next %s, want wake %s and next the 27th", before.Wake(), before.Next, want)
	}
	// After downtime: the slots on skip dates are not missed.
	due = s.Due(from, nil, time.Date(2024, 12, 27, 9, 30, 0, 0, loc))
	if due.SkipDate || due.Missed != 1 || !due.Due.Equal(time.Date(2024, 12, 27, 9, 0, 0, 0, loc)) {
		t.Errorf("Due after downtime: %+v, want the 27th, the 24th missed (the 25th and 26th are skip dates)", due)
	}

	// @every keeps its anchoring across a skipped day.
	every, err := Parse("@every 5h", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	var c2 Calendar
	c2.AddDates([]string{"2024-12-25"})
	every = every.WithCalendar(c2)
	anchor := time.Date(2024, 12, 24, 20, 0, 0, 0, time.UTC)
	if got := every.Next(anchor); !got.Equal(time.Date(2024, 12, 26, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("@every 5h from 24 Dec 20:00 skipping the 25th: %s, want 26 Dec 02:00", got)
	}
	// Between two slots, the next one stays on the anchor (earliest), not
	// on now.
	if got := every.Due(anchor, nil, anchor.Add(2*time.Hour)).Next; !got.Equal(time.Date(2024, 12, 26, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("@every 5h, 2 h after the anchor: next %s, want 26 Dec 02:00", got)
	}
	e20, err := Parse("@every 20s", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	e20 = e20.WithCalendar(c2)
	a := time.Date(2024, 12, 23, 10, 0, 0, 0, time.UTC)
	if got := e20.Due(a, nil, a.Add(5*time.Second)); !got.Next.Equal(a.Add(20 * time.Second)) {
		t.Errorf("@every 20s with a calendar, 5 s after the anchor: next %s, want %s", got.Next, a.Add(20*time.Second))
	}
	if plain, _ := Parse("@every 20s", "UTC"); plain.WithCalendar(Calendar{Once: true}) != plain {
		t.Error("a calendar without dates changed an @every schedule")
	}
}

// Each pass of a cron Task needs its schedule: parsing builds tables, the
// cache shares them (figures in docs/performance-history.md, "Parsed
// schedules are shared").
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse("30 2 * * 1-5", "Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCached(b *testing.B) {
	for b.Loop() {
		if _, err := ParseCached("30 2 * * 1-5", "Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}
