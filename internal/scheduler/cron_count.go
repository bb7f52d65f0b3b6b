package scheduler

import (
	"math"
	"time"

	"github.com/robfig/cron/v3"
)

// Finding and counting slots without visiting them one by one.
//
// A time zone is a sequence of periods with a constant UTC offset
// (time.Time.ZoneBounds gives each one). Within a period, the wall clock is
// the instant plus the offset, a bijection, so the slots of the period are
// exactly the matching wall-clock minutes of a plain calendar interval.
// Next finds the first one (skipping months without a matching day by
// table); counting goes per day (a table of matching minutes of a day) and per
// month (a table of matching days of a month, by month, leap year and
// weekday of the 1st). The cost is O(periods + months) in the gap, not
// O(slots): about two periods a year in a zone with DST, one in UTC.
//
// A wall-clock hour repeated at a fall-back change lies in two periods and
// is counted twice; a skipped one lies in none and is not counted. That is
// the definition of a slot Next uses (see the package documentation).

const (
	secondsPerDay = 86400
	minutesPerDay = 1440
	// starBit is robfig/cron's marker of a field written as "*" (or "?").
	starBit = 1 << 63
	// maxSlotGap bounds the search for the next slot: 30 years, well above
	// the longest gap of an expression that fires at all (8 years, for
	// February 29 around 2100).
	maxSlotGap = 30 * 366 * secondsPerDay
)

// tables are precomputed once per Schedule, so a Schedule stays immutable.
type tables struct {
	// dayMinutes[i] is the number of matching minutes of a day in [0, i].
	dayMinutes [minutesPerDay]int32
	// nextMinute[i] is the first matching minute of a day at or after i,
	// or -1.
	nextMinute [minutesPerDay]int16
	// monthDays[m-1][leap][wd] is the number of matching days of month m
	// in a (leap) year whose 1st is weekday wd (Sunday = 0).
	monthDays [12][2][7]int8
}

func buildTables(sp *cron.SpecSchedule) *tables {
	tb := &tables{}
	var n int32
	for i := range minutesPerDay {
		if sp.Hour&(1<<uint(i/60)) != 0 && sp.Minute&(1<<uint(i%60)) != 0 {
			n++
		}
		tb.dayMinutes[i] = n
	}
	next := int16(-1)
	for i := minutesPerDay - 1; i >= 0; i-- {
		if sp.Hour&(1<<uint(i/60)) != 0 && sp.Minute&(1<<uint(i%60)) != 0 {
			next = int16(i)
		}
		tb.nextMinute[i] = next
	}
	for m := 1; m <= 12; m++ {
		for leap := range 2 {
			for wd1 := range 7 {
				var c int8
				for d := 1; d <= daysIn(m, leap == 1); d++ {
					if dayMatches(sp, m, d, (wd1+d-1)%7) {
						c++
					}
				}
				tb.monthDays[m-1][leap][wd1] = c
			}
		}
	}
	return tb
}

// firesEver reports whether any date of any year matches (February 30 does
// not; February 29 does, in leap years).
func (tb *tables) firesEver() bool {
	if tb.dayMinutes[minutesPerDay-1] == 0 {
		return false
	}
	for _, byLeap := range tb.monthDays {
		for _, byWeekday := range byLeap {
			for _, c := range byWeekday {
				if c > 0 {
					return true
				}
			}
		}
	}
	return false
}

// dayMatches is robfig/cron's day rule: when day-of-month or day-of-week is
// "*", both must match; when both are restricted, either may.
func dayMatches(sp *cron.SpecSchedule, month, dom, weekday int) bool {
	if sp.Month&(1<<uint(month)) == 0 {
		return false
	}
	domOK := sp.Dom&(1<<uint(dom)) != 0
	dowOK := sp.Dow&(1<<uint(weekday)) != 0
	if sp.Dom&starBit != 0 || sp.Dow&starBit != 0 {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// periodEnd returns the last unix second of the zone's constant-offset
// period that contains probe, at most limit.
func (s *Schedule) periodEnd(probe time.Time, limit int64) int64 {
	end := limit
	if _, next := probe.ZoneBounds(); !next.IsZero() && next.Unix()-1 < end {
		end = next.Unix() - 1
	}
	return max(end, probe.Unix()) // never stall, whatever ZoneBounds says
}

// countSlots returns the number of slots in (a, b], both in unix seconds
// (slots are whole seconds, so (a, b] of instants is (floor a, floor b]).
func (s *Schedule) countSlots(a, b int64) int64 {
	var n int64
	for cur := a; cur < b; {
		probe := time.Unix(cur+1, 0).In(s.loc)
		_, offset := probe.Zone()
		end := s.periodEnd(probe, b)
		n += s.countWallClock(cur+int64(offset), end+int64(offset))
		cur = end
	}
	return n
}

// nextWallClock returns the first matching wall-clock minute x with
// from <= x <= limit, wall-clock readings as seconds since 1970-01-01 00:00.
func (s *Schedule) nextWallClock(from, limit int64) (int64, bool) {
	day := floorDiv(from, secondsPerDay)
	minute := (from - day*secondsPerDay + 59) / 60 // first minute starting at or after from
	lastDay := floorDiv(limit, secondsPerDay)
	for day <= lastDay {
		if minute < minutesPerDay && s.dayOK(day) {
			if i := s.tab.nextMinute[minute]; i >= 0 {
				x := day*secondsPerDay + int64(i)*60
				return x, x <= limit
			}
		}
		day, minute = s.nextDay(day+1, lastDay), 0
	}
	return 0, false
}

// nextDay returns the first matching day in [d, last], or last+1. Months
// without a matching day are skipped through the table.
func (s *Schedule) nextDay(d, last int64) int64 {
	y, m, dom := civil(d)
	wd := weekday(d)
	for d <= last {
		leap := isLeap(y)
		rest := int64(daysIn(m, leap) - dom + 1) // days left in the month, d included
		wd1 := ((wd-(dom-1))%7 + 7) % 7          // weekday of the 1st
		li := 0
		if leap {
			li = 1
		}
		if s.tab.monthDays[m-1][li][wd1] > 0 {
			for x, dd, w := d, dom, wd; x < d+rest && x <= last; x, dd, w = x+1, dd+1, (w+1)%7 {
				if dayMatches(s.spec, m, dd, w) {
					return x
				}
			}
		}
		d, dom, wd = d+rest, 1, (wd+int(rest%7))%7
		if m++; m > 12 {
			m, y = 1, y+1
		}
	}
	return last + 1
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// countWallClock counts the matching wall-clock minutes x with lo < x <= hi,
// lo and hi being wall-clock readings as seconds since 1970-01-01 00:00.
func (s *Schedule) countWallClock(lo, hi int64) int64 {
	if hi <= lo {
		return 0
	}
	dayLo, dayHi := floorDiv(lo, secondsPerDay), floorDiv(hi, secondsPerDay)
	upToLo := int64(s.tab.dayMinutes[(lo-dayLo*secondsPerDay)/60])
	upToHi := int64(s.tab.dayMinutes[(hi-dayHi*secondsPerDay)/60])
	if dayLo == dayHi {
		if s.dayOK(dayLo) {
			return upToHi - upToLo
		}
		return 0
	}
	perDay := int64(s.tab.dayMinutes[minutesPerDay-1])
	var n int64
	if s.dayOK(dayLo) {
		n += perDay - upToLo
	}
	if s.dayOK(dayHi) {
		n += upToHi
	}
	return n + s.countDays(dayLo+1, dayHi-1)*perDay
}

// dayOK reports whether the calendar day (days since 1970-01-01) matches.
func (s *Schedule) dayOK(day int64) bool {
	_, m, d := civil(day)
	return dayMatches(s.spec, m, d, weekday(day))
}

// countDays counts the matching calendar days in [d1, d2], whole months
// through the table.
func (s *Schedule) countDays(d1, d2 int64) int64 {
	if d2 < d1 {
		return 0
	}
	y, m, dom := civil(d1)
	wd := weekday(d1)
	var n int64
	for d := d1; d <= d2; {
		leap := isLeap(y)
		rest := int64(daysIn(m, leap) - dom + 1) // days left in the month, d included
		last := d + rest - 1
		if dom == 1 && last <= d2 {
			li := 0
			if leap {
				li = 1
			}
			n += int64(s.tab.monthDays[m-1][li][wd])
		} else {
			for x, dd, w := d, dom, wd; x <= min(last, d2); x, dd, w = x+1, dd+1, (w+1)%7 {
				if dayMatches(s.spec, m, dd, w) {
					n++
				}
			}
		}
		d, dom, wd = last+1, 1, (wd+int(rest%7))%7
		if m++; m > 12 {
			m, y = 1, y+1
		}
	}
	return n
}

// civil returns the proleptic Gregorian date of a day since 1970-01-01.
func civil(day int64) (year, month, dom int) {
	y, m, d := time.Unix(day*secondsPerDay, 0).UTC().Date()
	return y, int(m), d
}

// weekday of a day since 1970-01-01 (a Thursday), Sunday = 0.
func weekday(day int64) int {
	return int(((day % 7) + 7 + 4) % 7)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(month int, leap bool) int {
	switch month {
	case 2:
		if leap {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
