// Package scheduler decides which runs of a Task start now: the initial run
// of a one-shot Task, a run-now token's run, and a cron Task's due slot,
// each under suspend and concurrencyPolicy (plan.go); the time math of
// cron schedules behind it (cron.go, cron_count.go); and business
// calendars on top of it: skip dates, the daylight-saving policies and the
// slots of a backfill range (calendar.go).
//
// Everything here is pure: no clocks, no API calls; every function takes
// the current time as a parameter.
//
// # What a slot is
//
// A slot of a cron expression is every instant whose wall-clock reading in
// the schedule's time zone matches all five fields, at second 0. The fields
// are parsed by github.com/robfig/cron/v3 (the parser the Kubernetes
// CronJob controller uses, so the same expressions mean the same), and a
// day matches robfig/cron's way: when day-of-month or day-of-week is "*"
// both must match, when both are restricted either may. At daylight-saving
// changes in a named zone that means:
//
//   - Spring forward (America/New_York 2024-03-10 02:00 -> 03:00, or
//     Europe/Berlin 2024-03-31 02:00 -> 03:00): wall-clock times in the gap
//     do not exist, so a slot that falls in the gap is skipped for that day.
//     A daily "30 2 * * *" does not run on that day at all (it is not moved
//     to 03:00); an hourly schedule has 23 slots that day, 01:00 then 03:00.
//   - Fall back (America/New_York 2024-11-03 02:00 -> 01:00, or
//     Europe/Berlin 2024-10-27 03:00 -> 02:00): the repeated wall-clock hour
//     happens twice, so a slot in it matches twice, at two instants one real
//     hour apart. A daily "30 1 * * *" in New York (or "30 2 * * *" in
//     Berlin) runs twice that day; an hourly schedule has 25 slots, all one
//     real hour apart. Every slot is a distinct instant, so run ids (unix
//     seconds of the slot) never repeat.
//
// That is exactly what robfig/cron's SpecSchedule.Next (and so the CronJob
// controller) does in zones whose DST shift is a whole hour; a test checks
// it. Next does not call it, though, because robfig/cron goes wrong
// elsewhere: with a 30-minute shift (Australia/Lord_Howe) it returns
// wall-clock times that do not match ("45 1 * * *" fires at 02:45) and
// skips real slots ("0 0 * * *" skips a midnight), across a skipped day
// (Pacific/Apia, 30 December 2011) it loops forever, and it gives up when
// no slot exists within about five years (a "0 0 29 2 *" schedule between
// 2097 and 2104). Next walks the zone's constant-offset periods instead
// (time.Time.ZoneBounds) and matches wall-clock minutes within each; Due's
// counting uses the same walk, so Next, Due and the missed count agree.
//
// # @every
//
// "@every d" has no wall-clock slots: robfig/cron runs it d after the
// previous run, rounded down to the whole second. Here the previous run is
// the earliest time handed to Due (the last slot that ran, or the Task's
// creation), so the slots are floor(earliest) + k*d for k = 1, 2, ...; Next(t)
// is floor(t) + d, the next slot when t is the previous one, so
// Due(...).Next == Next(Due(...).Due) whenever a slot is due. Time zones do
// not affect @every.
package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// The Go time zone database is embedded in the binary so spec.timeZone
	// works in a distroless image without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron schedule bound to its time zone. It is
// immutable and safe for concurrent use.
type Schedule struct {
	loc *time.Location
	// every > 0 for "@every" schedules; spec is nil then.
	every time.Duration
	spec  *cron.SpecSchedule
	tab   *tables
	// cal is the business calendar (calendar.go); nil: none.
	cal *Calendar
}

// Slots is what is due at now.
type Slots struct {
	// Due is the most recent slot in (earliest, now]; zero if none.
	Due time.Time
	// Missed counts the slots in (earliest, now] other than Due: they will
	// never run. 0 when at most one slot was due.
	Missed int64
	// TooLate: Due is older than now - startingDeadline. Skip it and count
	// it as missed too (the total missed is then Missed+1).
	TooLate bool
	// Next is the first slot strictly after now (and after earliest and
	// Due) that will run: not on a skip date. Zero only if no slot can
	// ever come.
	Next time.Time
	// SkipDate: Due's date is a skip date (Calendar): it falls due but
	// does not run, and is not missed.
	SkipDate bool
	// NextSkipped is the first slot after now when it comes before Next
	// and is on a skip date: the pass wakes for it to record and report
	// the skip. Zero otherwise.
	NextSkipped time.Time
}

// Wake is when the Task needs its next look for its schedule: the next
// slot, or an earlier one on a skip date.
func (s Slots) Wake() time.Time {
	if !s.NextSkipped.IsZero() && (s.Next.IsZero() || s.NextSkipped.Before(s.Next)) {
		return s.NextSkipped
	}
	return s.Next
}

// MinEvery is the shortest "@every" duration accepted. Every slot is a
// Job, a pod and a status write; a Job takes 2.5-5 s from creation to
// its end on the local cluster's real node, so a shorter period only
// piles up runs (Allow) or skips slots (Forbid), and lets one Task keep
// the operator and the API server busy for everyone. CronJob's minimum is
// a minute; five seconds keeps demos and test loops possible.
const MinEvery = 5 * time.Second

var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// fieldNames and fieldParsers describe the five cron fields in order.
var (
	fieldNames   = [5]string{"minute", "hour", "day-of-month", "month", "day-of-week"}
	fieldParsers = [5]cron.Parser{
		cron.NewParser(cron.Minute),
		cron.NewParser(cron.Hour),
		cron.NewParser(cron.Dom),
		cron.NewParser(cron.Month),
		cron.NewParser(cron.Dow),
	}
	standardParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// Parse accepts 5 cron fields (minute hour dom month dow), the descriptors
// @yearly @annually @monthly @weekly @daily @midnight @hourly, and
// "@every <Go duration>" (a whole number of seconds, at least MinEvery). It
// refuses CRON_TZ= and TZ= prefixes (use spec.timeZone), seconds fields,
// expressions that can never fire (such as February 30) and unknown zones.
// timeZone "" means UTC; "Local" is refused (it would depend on the
// operator's machine). Errors are user-facing: each names the field
// (spec.schedule or spec.timeZone) and says what is wrong; when both are
// wrong, both are reported, on one line.
func Parse(schedule, timeZone string) (*Schedule, error) {
	loc, zoneErr := loadZone(timeZone)
	s, schedErr := parseExpr(schedule)
	switch {
	case schedErr != nil && zoneErr != nil:
		// One line, as it ends up in a condition message.
		return nil, fmt.Errorf("%w; %w", schedErr, zoneErr)
	case schedErr != nil:
		return nil, schedErr
	case zoneErr != nil:
		return nil, zoneErr
	}
	s.loc = loc
	if s.spec != nil {
		s.spec.Location = loc
	}
	return s, nil
}

func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf(`spec.timeZone: "Local" is not allowed because it depends on the operator's machine; use an IANA time zone name such as "Europe/Berlin" or "UTC"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf(`spec.timeZone: unknown time zone %q; use an IANA time zone name such as "America/New_York" or "UTC"`, name)
	}
	return loc, nil
}

func parseExpr(schedule string) (*Schedule, error) {
	expr := strings.TrimSpace(schedule)
	if expr == "" {
		return nil, errors.New("spec.schedule: must not be empty")
	}
	upper := strings.ToUpper(expr)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(upper, prefix) {
			return nil, fmt.Errorf("spec.schedule: the %s prefix is not supported; remove it and set the zone in spec.timeZone instead", prefix)
		}
	}
	fields := strings.Fields(expr)
	if strings.HasPrefix(fields[0], "@") {
		return parseDescriptor(expr, fields)
	}
	switch n := len(fields); {
	case n == 6:
		return nil, fmt.Errorf("spec.schedule: %q has 6 fields; a seconds field is not supported, use 5 fields: minute hour day-of-month month day-of-week", expr)
	case n != 5:
		return nil, fmt.Errorf("spec.schedule: %q has %d field(s); a cron expression has 5 fields (minute hour day-of-month month day-of-week) or is a descriptor such as @hourly or @every 1h", expr, n)
	}
	// Parse field by field first so the message names the bad field.
	for i, f := range fields {
		if strings.Contains(f, "=") {
			// robfig/cron would read a field starting with TZ= as a zone.
			return nil, fmt.Errorf("spec.schedule: invalid %s field %q in %q: \"=\" is not allowed; set the zone in spec.timeZone", fieldNames[i], f, expr)
		}
		if _, err := fieldParsers[i].Parse(f); err != nil {
			return nil, fmt.Errorf("spec.schedule: invalid %s field %q in %q: %v", fieldNames[i], f, expr, err)
		}
	}
	sched, err := standardParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, fmt.Errorf("spec.schedule: invalid cron expression %q: %v", expr, err)
	}
	return newSpecSchedule(expr, sched)
}

func parseDescriptor(expr string, fields []string) (*Schedule, error) {
	name := fields[0]
	if name == "@every" {
		if len(fields) != 2 {
			return nil, fmt.Errorf("spec.schedule: %q: @every takes one Go duration such as 90s, 5m or 1h30m", expr)
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return nil, fmt.Errorf("spec.schedule: %q: %q is not a Go duration such as 90s, 5m or 1h30m", expr, fields[1])
		}
		if d < MinEvery {
			return nil, fmt.Errorf("spec.schedule: %q: the @every duration must be at least %v", expr, MinEvery)
		}
		if d%time.Second != 0 {
			return nil, fmt.Errorf("spec.schedule: %q: the @every duration must be a whole number of seconds", expr)
		}
		return &Schedule{every: d}, nil
	}
	if !descriptors[name] {
		return nil, fmt.Errorf("spec.schedule: unknown descriptor %q; use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>", name)
	}
	if len(fields) != 1 {
		return nil, fmt.Errorf("spec.schedule: %q: %s takes no arguments", expr, name)
	}
	sched, err := standardParser.Parse(name)
	if err != nil {
		return nil, fmt.Errorf("spec.schedule: invalid descriptor %q: %v", name, err)
	}
	return newSpecSchedule(expr, sched)
}

func newSpecSchedule(expr string, sched cron.Schedule) (*Schedule, error) {
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok || spec.Second != 1 {
		return nil, fmt.Errorf("spec.schedule: %q is not supported", expr)
	}
	s := &Schedule{spec: spec, tab: buildTables(spec)}
	if !s.tab.firesEver() {
		return nil, fmt.Errorf("spec.schedule: %q never fires: no date matches both its day-of-month and month fields", expr)
	}
	return s, nil
}

// Next returns the first slot strictly after t, in the schedule's time
// zone; zero only if there is none within 30 years (Parse refuses
// expressions that never fire, and the longest gap a valid one can have is
// 8 years: February 29 around 2100). For "@every d" it is
// floor(t) + d, robfig's anchoring: t is taken as the previous run.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.cal != nil {
		return s.next(t)
	}
	if s.every > 0 {
		return time.Unix(t.Unix(), 0).Add(s.every).In(s.loc)
	}
	return s.cronNext(t)
}

// cronNext returns the first slot after floor(t): the first wall-clock
// match, searched one constant-offset period of the zone at a time.
func (s *Schedule) cronNext(t time.Time) time.Time {
	cur := t.Unix() // slots are whole seconds: after t means after floor(t)
	horizon := satAdd(cur, maxSlotGap)
	for cur < horizon {
		probe := time.Unix(cur+1, 0).In(s.loc)
		_, offset := probe.Zone()
		off := int64(offset)
		end := s.periodEnd(probe, horizon)
		if x, ok := s.nextWallClock(cur+1+off, end+off); ok {
			return time.Unix(x-off, 0).In(s.loc)
		}
		cur = end
	}
	return time.Time{}
}

// Due computes which slot is due at now. earliest is the last slot that
// already ran (status lastScheduleTime), or the Task's creation time when
// none ran. startingDeadline nil means no deadline; a negative one counts
// as zero. A slot can start up to startingDeadline after it, inclusive.
//
// Due is the newest slot in (earliest, now], even when it is past the
// deadline (then TooLate is set), so the caller can record it as handled
// and never count the same missed slots again. Only a slot within the
// deadline window can be due without TooLate, which is what the CronJob
// controller gets by moving earliest up to now - deadline; Missed still
// counts every skipped slot since the real earliest.
//
// A clock that went backwards (now before earliest) yields no due slot and
// Next after earliest. The cost does not grow with the number of slots in
// the gap: a minutely schedule down for 30 days or 30 years costs about the
// same.
func (s *Schedule) Due(earliest time.Time, startingDeadline *time.Duration, now time.Time) Slots {
	var out Slots
	switch {
	case now.Before(earliest):
		out.Next = s.Next(earliest)
		return out
	case s.cal != nil:
		return s.dueWithCalendar(earliest, startingDeadline, now)
	case s.every > 0:
		out = s.dueEvery(earliest, now)
	default:
		out = s.dueCron(earliest, now)
	}
	if !out.Due.IsZero() && startingDeadline != nil {
		out.TooLate = now.Sub(out.Due) > max(*startingDeadline, 0)
	}
	return out
}

// dueEvery: slots are floor(earliest) + k*d, k >= 1.
func (s *Schedule) dueEvery(earliest, now time.Time) Slots {
	var out Slots
	e, b, step := earliest.Unix(), now.Unix(), int64(s.every/time.Second)
	k := (b - e) / step
	if k >= 1 {
		out.Due = time.Unix(e+k*step, 0).In(s.loc)
		out.Missed = k - 1
	}
	out.Next = time.Unix(e+(k+1)*step, 0).In(s.loc)
	return out
}

func (s *Schedule) dueCron(earliest, now time.Time) Slots {
	out := Slots{Next: s.cronNext(now)}
	first := s.cronNext(earliest)
	if first.IsZero() || first.After(now) {
		return out
	}
	second := s.cronNext(first)
	if second.IsZero() || second.After(now) {
		out.Due = first
		return out
	}
	// Two or more slots are due. Find the newest by bisecting over whole
	// seconds: lo always has Next(lo) <= now, hi never does.
	lo, hi := first.Unix(), now.Unix()
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if n := s.cronNext(time.Unix(mid, 0)); !n.IsZero() && !n.After(now) {
			lo = mid
		} else {
			hi = mid
		}
	}
	out.Due = s.cronNext(time.Unix(lo, 0))
	// first and second are both in the window, so at least one is missed.
	out.Missed = max(s.countSlots(earliest.Unix(), now.Unix())-1, 1)
	return out
}
