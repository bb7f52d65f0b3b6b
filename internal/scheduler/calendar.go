package scheduler

import (
	"fmt"
	"strings"
	"time"
)

// A business calendar changes which slots of a schedule run:
//
//   - skip dates (spec.skipDates, spec.skipDatesFrom): a slot whose date,
//     in the schedule's zone, is listed does not run. It still falls due
//     (Slots.SkipDate says so, for the SlotSkipped event) but is not
//     missed, and Next passes over it.
//   - Once (spec.repeatedTimePolicy): a wall-clock time that happens twice
//     when clocks fall back runs at its first occurrence only; the second
//     is no slot at all (Twice keeps both, the package's plain definition).
//   - RunAfter (spec.skippedTimePolicy): a spring-forward gap that holds
//     matching wall-clock times gives one slot at the first instant after
//     the gap (the transition), unless that instant is a slot anyway (Skip
//     keeps the plain definition: no slot).
//
// The "effective" slots are the plain slots minus Once's second
// occurrences plus RunAfter's gap slots; skip dates are applied on top.
// Counting stays proportional to zone transitions and skip dates in the
// window, not to slots.

// Calendar is a schedule's business calendar. The zero value changes
// nothing but Once, which the API defaults to true: set it from the spec.
type Calendar struct {
	dates    map[[3]int]bool // YYYY-MM-DD
	yearly   map[[2]int]bool // --MM-DD, every year
	Once     bool
	RunAfter bool
}

// AddDates adds skip dates, YYYY-MM-DD or --MM-DD (blank entries and lines
// starting with # are ignored, for ConfigMap lists). It returns one problem
// per entry it could not read, naming it; the others are added.
func (c *Calendar) AddDates(entries []string) []string {
	if c.dates == nil {
		c.dates, c.yearly = map[[3]int]bool{}, map[[2]int]bool{}
	}
	var problems []string
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" || strings.HasPrefix(e, "#") {
			continue
		}
		if md, ok := strings.CutPrefix(e, "--"); ok {
			t, err := time.Parse("01-02", md)
			if err != nil && md != "02-29" {
				problems = append(problems, fmt.Sprintf("%q is not --MM-DD", e))
				continue
			}
			if md == "02-29" {
				c.yearly[[2]int{2, 29}] = true
				continue
			}
			c.yearly[[2]int{int(t.Month()), t.Day()}] = true
			continue
		}
		t, err := time.Parse("2006-01-02", e)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%q is not YYYY-MM-DD or --MM-DD", e))
			continue
		}
		c.dates[[3]int{t.Year(), int(t.Month()), t.Day()}] = true
	}
	return problems
}

// skips reports whether the slot's date, in its zone, is a skip date.
func (c *Calendar) skips(t time.Time) bool {
	if c == nil || (len(c.dates) == 0 && len(c.yearly) == 0) {
		return false
	}
	y, m, d := t.Date()
	return c.dates[[3]int{y, int(m), d}] || c.yearly[[2]int{int(m), d}]
}

// SkipsDay reports whether t's date in the zone named tz (spec.timeZone;
// "" is UTC) is a skip date: what a run that upstream runs start
// (spec.after) is held to. A zone that cannot be loaded is an error, as
// for a schedule.
func (c *Calendar) SkipsDay(t time.Time, tz string) (bool, error) {
	loc, err := loadZone(tz)
	if err != nil {
		return false, err
	}
	return c.skips(t.In(loc)), nil
}

// WithCalendar is the schedule with c applied (a copy: a Schedule is
// immutable). Once and RunAfter do not apply to "@every", which has no
// wall-clock slots.
func (s *Schedule) WithCalendar(c Calendar) *Schedule {
	noDates := len(c.dates) == 0 && len(c.yearly) == 0
	if noDates && (s.every > 0 || !c.Once && !c.RunAfter) {
		return s // nothing changes: the plain schedule, and its cheaper paths
	}
	out := *s
	out.cal = &c
	return &out
}

// maxCalendarSteps bounds the loops over excluded slots and skipped days:
// far more than a valid calendar needs (400 skip dates, 60 minutes of a
// repeated hour).
const maxCalendarSteps = 5000

// once and runAfter say whether the policies apply.
func (s *Schedule) once() bool     { return s.cal != nil && s.cal.Once && s.every == 0 }
func (s *Schedule) runAfter() bool { return s.cal != nil && s.cal.RunAfter && s.every == 0 }

// baseNext is the plain next slot (the package's definition).
func (s *Schedule) baseNext(t time.Time) time.Time {
	if s.every > 0 {
		return time.Unix(t.Unix(), 0).Add(s.every).In(s.loc)
	}
	return s.cronNext(t)
}

// secondOccurrence reports whether slot x repeats a wall-clock time that
// already happened: it lies in the first `shift` of a period that began
// when clocks went back by shift.
func (s *Schedule) secondOccurrence(x time.Time) bool {
	start, _ := x.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := x.Zone()
	_, prev := start.Add(-time.Second).Zone()
	return prev > off && x.Unix() < start.Unix()+int64(prev-off)
}

// transition is a change of the zone's UTC offset at instant at.
type transition struct {
	at            int64
	before, after int // offsets in seconds
}

// transitions lists the zone's offset changes in (a, b].
func (s *Schedule) transitions(a, b int64) []transition {
	var out []transition
	for cur := a; cur < b; {
		probe := time.Unix(cur+1, 0).In(s.loc)
		if start, _ := probe.ZoneBounds(); !start.IsZero() && start.Unix() == cur+1 {
			_, after := probe.Zone()
			_, before := time.Unix(cur, 0).In(s.loc).Zone()
			if before != after {
				out = append(out, transition{at: cur + 1, before: before, after: after})
			}
		}
		end := s.periodEnd(probe, b)
		if end <= cur {
			break
		}
		cur = end
	}
	return out
}

// gapSlot reports whether a spring-forward transition gives RunAfter a slot
// at its instant: its gap holds a matching wall-clock time and the instant
// is not a plain slot already.
func (s *Schedule) gapSlot(tr transition) bool {
	if tr.after <= tr.before {
		return false
	}
	at := int64(tr.at)
	if _, ok := s.nextWallClock(at+int64(tr.before), at+int64(tr.after)-1); !ok {
		return false
	}
	plain := s.cronNext(time.Unix(at-1, 0))
	return plain.Unix() != at
}

// nextEffective is the first effective slot after t (skip dates apart).
func (s *Schedule) nextEffective(t time.Time) time.Time {
	c := s.baseNext(t)
	for i := 0; s.once() && !c.IsZero() && s.secondOccurrence(c) && i < maxCalendarSteps; i++ {
		c = s.baseNext(c)
	}
	if s.runAfter() {
		limit := satAdd(t.Unix(), maxSlotGap)
		if !c.IsZero() {
			limit = c.Unix() - 1
		}
		for _, tr := range s.transitions(t.Unix(), limit) {
			if s.gapSlot(tr) {
				return time.Unix(tr.at, 0).In(s.loc)
			}
		}
	}
	return c
}

// next is Next with the calendar: the first effective slot after t whose
// date is not skipped.
func (s *Schedule) next(t time.Time) time.Time {
	x := s.nextEffective(t)
	for i := 0; !x.IsZero() && s.cal.skips(x) && i < maxCalendarSteps; i++ {
		x = s.nextEffective(s.lastBeforeNextDay(x))
	}
	return x
}

// lastBeforeNextDay is the instant from which the first slot after is on a
// later date than x: one second before the local midnight that ends x's day
// (for @every, the last slot of x's day, keeping its anchoring).
func (s *Schedule) lastBeforeNextDay(x time.Time) time.Time {
	y, m, d := x.Date()
	end := time.Date(y, m, d+1, 0, 0, 0, 0, s.loc)
	if s.every > 0 {
		step := int64(s.every / time.Second)
		k := (end.Unix() - x.Unix() - 1) / step // slots x + k*step still before end
		return time.Unix(x.Unix()+k*step, 0).In(s.loc)
	}
	return end.Add(-time.Second)
}

// newestEffective is the newest effective slot in (a, b]; zero if none.
func (s *Schedule) newestEffective(a, b time.Time) time.Time {
	d := s.plainDue(a, b)
	for i := 0; s.once() && !d.IsZero() && s.secondOccurrence(d) && i < maxCalendarSteps; i++ {
		d = s.plainDue(a, d.Add(-time.Second))
	}
	if s.runAfter() {
		lo := a.Unix()
		if !d.IsZero() {
			lo = d.Unix()
		}
		trs := s.transitions(lo, b.Unix())
		for i := len(trs) - 1; i >= 0; i-- {
			if s.gapSlot(trs[i]) {
				return time.Unix(trs[i].at, 0).In(s.loc)
			}
		}
	}
	return d
}

// plainDue is the newest plain slot in (a, b].
func (s *Schedule) plainDue(a, b time.Time) time.Time {
	if !b.After(a) {
		return time.Time{}
	}
	if s.every > 0 {
		return s.dueEvery(a, b).Due
	}
	return s.dueCron(a, b).Due
}

// countEffective counts the effective slots in (a, b], unix seconds; for
// "@every", a is the anchor (Due's earliest).
func (s *Schedule) countEffective(a, b int64) int64 {
	if b <= a {
		return 0
	}
	if s.every > 0 {
		return s.everyCount(a, b)
	}
	n := s.countSlots(a, b)
	if !s.once() && !s.runAfter() {
		return n
	}
	// A fall-back transition up to a day before a may still repeat times
	// inside the window.
	for _, tr := range s.transitions(a-secondsPerDay, b) {
		switch {
		case s.once() && tr.before > tr.after:
			lo, hi := max(tr.at, a+1), min(tr.at+int64(tr.before-tr.after)-1, b)
			if hi >= lo {
				n -= s.countSlots(lo-1, hi)
			}
		case s.runAfter() && tr.at > a && s.gapSlot(tr):
			n++
		}
	}
	return max(n, 0)
}

// countSkipped counts the effective slots in (a, b] on skip dates.
func (s *Schedule) countSkipped(a, b int64) int64 {
	if s.cal == nil || (len(s.cal.dates) == 0 && len(s.cal.yearly) == 0) {
		return 0
	}
	var days [][3]int
	for d := range s.cal.dates {
		days = append(days, d)
	}
	y0, y1 := time.Unix(a, 0).In(s.loc).Year(), time.Unix(b, 0).In(s.loc).Year()
	for md := range s.cal.yearly {
		for y := y0; y <= y1; y++ {
			if md[0] == 2 && md[1] == 29 && !isLeap(y) {
				continue
			}
			if !s.cal.dates[[3]int{y, md[0], md[1]}] {
				days = append(days, [3]int{y, md[0], md[1]})
			}
		}
	}
	var n int64
	for _, d := range days {
		start := time.Date(d[0], time.Month(d[1]), d[2], 0, 0, 0, 0, s.loc).Unix()
		end := time.Date(d[0], time.Month(d[1]), d[2]+1, 0, 0, 0, 0, s.loc).Unix()
		lo, hi := max(start-1, a), min(end-1, b)
		if hi <= lo {
			continue
		}
		if s.every > 0 {
			n += s.everyCount(a, hi) - s.everyCount(a, lo)
			continue
		}
		n += s.countEffective(lo, hi)
	}
	return n
}

// everyCount counts "@every" slots in (anchor, b]: anchor + k*d, k >= 1.
func (s *Schedule) everyCount(anchor, b int64) int64 {
	if b <= anchor {
		return 0
	}
	return (b - anchor) / int64(s.every/time.Second)
}

// dueWithCalendar is Due when a calendar applies.
func (s *Schedule) dueWithCalendar(earliest time.Time, startingDeadline *time.Duration, now time.Time) Slots {
	first := s.nextEffective(now)
	if s.every > 0 {
		// @every slots are anchored at earliest, not at now.
		first = s.dueEvery(earliest, now).Next
	}
	out := Slots{Next: first}
	for i := 0; !out.Next.IsZero() && s.cal.skips(out.Next) && i < maxCalendarSteps; i++ {
		out.Next = s.nextEffective(s.lastBeforeNextDay(out.Next))
	}
	if !first.IsZero() && first.Before(out.Next) {
		out.NextSkipped = first
	}
	out.Due = s.newestEffective(earliest, now)
	if out.Due.IsZero() {
		return out
	}
	out.SkipDate = s.cal.skips(out.Due)
	a, b := earliest.Unix(), now.Unix()
	missed := s.countEffective(a, b) - s.countSkipped(a, b)
	if !out.SkipDate {
		missed-- // the due slot itself
	}
	out.Missed = max(missed, 0)
	if startingDeadline != nil && !out.SkipDate {
		out.TooLate = now.Sub(out.Due) > max(*startingDeadline, 0)
	}
	return out
}

// MaxBackfillSlots bounds one backfill request: more slots in its range
// refuse it, nothing started.
const MaxBackfillSlots = 1000

// SlotsIn are the slots in [from, to] that run (skip dates left out),
// oldest first; an error when there are more than limit.
func (s *Schedule) SlotsIn(from, to time.Time, limit int) ([]time.Time, error) {
	var out []time.Time
	for t := s.Next(from.Add(-time.Second)); !t.IsZero() && !t.After(to); t = s.Next(t) {
		if len(out) == limit {
			return nil, fmt.Errorf("the range holds more than %d slots", limit)
		}
		out = append(out, t)
	}
	return out, nil
}
