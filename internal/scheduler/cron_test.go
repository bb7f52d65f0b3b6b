package scheduler

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// at parses an RFC 3339 instant; "" is the zero time.
func at(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func dur(d time.Duration) *time.Duration { return &d }

func mustParse(t *testing.T, schedule, zone string) *Schedule {
	t.Helper()
	s, err := Parse(schedule, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", schedule, zone, err)
	}
	return s
}

func show(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Format(time.RFC3339Nano) + " (" + t.UTC().Format(time.RFC3339Nano) + ")"
}

func TestParse(t *testing.T) {
	cases := []struct {
		name     string
		schedule string
		zone     string
		// wantErr lists substrings of the error; nil means accepted.
		wantErr []string
		// notInErr lists substrings the error must not have.
		notInErr []string
	}{
		{name: "five fields in UTC are accepted", schedule: "*/5 * * * *"},
		{name: "month and weekday names are accepted", schedule: "0 9 * jan-mar mon-fri"},
		{name: "spaces around and between the fields are ignored", schedule: "  0   9 * * *  "},
		{name: "the @yearly descriptor is accepted", schedule: "@yearly"},
		{name: "the @annually descriptor is accepted", schedule: "@annually"},
		{name: "the @monthly descriptor is accepted", schedule: "@monthly"},
		{name: "the @weekly descriptor is accepted", schedule: "@weekly"},
		{name: "the @daily descriptor is accepted", schedule: "@daily"},
		{name: "the @midnight descriptor is accepted", schedule: "@midnight"},
		{name: "the @hourly descriptor is accepted", schedule: "@hourly"},
		{name: "@every 90s is accepted", schedule: "@every 90s"},
		{name: "@every with a compound duration is accepted", schedule: "@every 1h30m"},
		{name: "@every exactly five seconds is accepted", schedule: "@every 5s"},
		{name: "February 29 is accepted because leap years have it", schedule: "0 0 29 2 *"},
		{name: "an IANA time zone is accepted", schedule: "30 2 * * *", zone: "Europe/Berlin"},
		{name: "UTC spelled out is accepted", schedule: "30 2 * * *", zone: "UTC"},

		{name: "an empty schedule is refused", schedule: "", wantErr: []string{"spec.schedule", "must not be empty"}},
		{name: "a blank schedule is refused", schedule: "   ", wantErr: []string{"spec.schedule", "must not be empty"}},
		{
			name: "a CRON_TZ= prefix is refused and points to spec.timeZone", schedule: "CRON_TZ=Europe/Berlin 0 9 * * *",
			wantErr: []string{"spec.schedule", "CRON_TZ=", "spec.timeZone"},
		},
		{
			name: "a TZ= prefix is refused and points to spec.timeZone", schedule: "TZ=UTC 0 9 * * *",
			wantErr: []string{"spec.schedule", "TZ=", "spec.timeZone"},
		},
		{
			name: "a lowercase tz= prefix is refused too", schedule: "tz=UTC 0 9 * * *",
			wantErr: []string{"spec.schedule", "TZ=", "spec.timeZone"},
		},
		{
			name: "a TZ= inside a later field is refused without a panic", schedule: "0 TZ=UTC * * *",
			wantErr: []string{"spec.schedule", "hour field", "spec.timeZone"},
		},
		{
			name: "a seconds field (six fields) is refused", schedule: "0 0 9 * * *",
			wantErr: []string{"spec.schedule", "6 fields", "seconds field is not supported"},
		},
		{name: "four fields are refused", schedule: "0 9 * *", wantErr: []string{"spec.schedule", "4 field", "5 fields"}},
		{name: "garbage is refused", schedule: "banana", wantErr: []string{"spec.schedule", `"banana"`, "5 fields"}},
		{name: "five words of garbage are refused naming the first bad field", schedule: "a b c d e", wantErr: []string{"spec.schedule", `minute field "a"`}},
		{name: "minute 60 is refused naming the minute field", schedule: "60 * * * *", wantErr: []string{"spec.schedule", `minute field "60"`, "above maximum"}},
		{name: "hour 24 is refused naming the hour field", schedule: "0 24 * * *", wantErr: []string{"spec.schedule", `hour field "24"`, "above maximum"}},
		{name: "day of month 0 is refused naming its field", schedule: "0 0 0 * *", wantErr: []string{"spec.schedule", `day-of-month field "0"`}},
		{name: "an unknown month name is refused naming the month field", schedule: "0 0 1 foo *", wantErr: []string{"spec.schedule", `month field "foo"`}},
		{name: "day of week 7 is refused naming its field", schedule: "0 0 * * 7", wantErr: []string{"spec.schedule", `day-of-week field "7"`}},
		{name: "a zero step is refused", schedule: "*/0 * * * *", wantErr: []string{"spec.schedule", "minute field", "step"}},
		{name: "February 30 is refused because it never fires", schedule: "0 0 30 2 *", wantErr: []string{"spec.schedule", "never fires"}},
		{name: "the 31st of a 30-day month is refused because it never fires", schedule: "0 0 31 4,6,9,11 *", wantErr: []string{"spec.schedule", "never fires"}},
		{name: "an unknown descriptor is refused", schedule: "@fortnightly", wantErr: []string{"spec.schedule", `unknown descriptor "@fortnightly"`}},
		{name: "a descriptor with an argument is refused", schedule: "@daily 5", wantErr: []string{"spec.schedule", "takes no arguments"}},
		{name: "@every without a duration is refused", schedule: "@every", wantErr: []string{"spec.schedule", "@every takes one Go duration"}},
		{name: "@every with two durations is refused", schedule: "@every 1m 2m", wantErr: []string{"spec.schedule", "@every takes one Go duration"}},
		{name: "@every with a bad duration is refused", schedule: "@every soon", wantErr: []string{"spec.schedule", `"soon" is not a Go duration`}},
		{name: "@every below five seconds is refused", schedule: "@every 4s", wantErr: []string{"spec.schedule", "at least 5s"}},
		{name: "@every below one second is refused", schedule: "@every 500ms", wantErr: []string{"spec.schedule", "at least 5s"}},
		{name: "@every zero is refused", schedule: "@every 0s", wantErr: []string{"spec.schedule", "at least 5s"}},
		{name: "@every with a negative duration is refused", schedule: "@every -1m", wantErr: []string{"spec.schedule", "at least 5s"}},
		{name: "@every with a fraction of a second is refused", schedule: "@every 7.5s", wantErr: []string{"spec.schedule", "whole number of seconds"}},
		{
			name: "an unknown time zone is refused naming spec.timeZone", schedule: "0 9 * * *", zone: "Mars/Olympus_Mons",
			wantErr: []string{"spec.timeZone", `"Mars/Olympus_Mons"`, "IANA"}, notInErr: []string{"spec.schedule"},
		},
		{
			name: "Local is refused as a time zone", schedule: "0 9 * * *", zone: "Local",
			wantErr: []string{"spec.timeZone", `"Local"`}, notInErr: []string{"spec.schedule"},
		},
		{
			name: "a file path is refused as a time zone", schedule: "0 9 * * *", zone: "../../etc/passwd",
			wantErr: []string{"spec.timeZone", "unknown time zone"},
		},
		{
			name: "a bad schedule and a bad zone are both reported", schedule: "0 25 * * *", zone: "Nowhere/Town",
			wantErr: []string{"spec.schedule", "hour field", "spec.timeZone", "Nowhere/Town"}, notInErr: []string{"\n"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.schedule, tc.zone)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Parse(%q, %q) = %v, want no error", tc.schedule, tc.zone, err)
				}
				if s == nil {
					t.Fatalf("Parse(%q, %q) returned a nil schedule", tc.schedule, tc.zone)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q, %q) = no error, want one with %q", tc.schedule, tc.zone, tc.wantErr)
			}
			if s != nil {
				t.Errorf("Parse(%q, %q) returned a schedule with its error", tc.schedule, tc.zone)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.notInErr {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q contains %q", err, w)
				}
			}
		})
	}
}

func TestNext(t *testing.T) {
	cases := []struct {
		name     string
		schedule string
		zone     string
		from     string
		// want are the successive slots: Next(from), Next(Next(from)), ...
		want []string
	}{
		{
			name: "next is strictly after a slot instant", schedule: "0 * * * *",
			from: "2016-05-19T10:00:00Z", want: []string{"2016-05-19T11:00:00Z"},
		},
		{
			name: "next from a nanosecond before a slot is that slot", schedule: "0 * * * *",
			from: "2016-05-19T09:59:59.999999999Z", want: []string{"2016-05-19T10:00:00Z"},
		},
		{
			name: "next from a nanosecond after a slot is the following slot", schedule: "0 * * * *",
			from: "2016-05-19T10:00:00.000000001Z", want: []string{"2016-05-19T11:00:00Z"},
		},
		{
			name: "an empty time zone means UTC", schedule: "0 9 * * *",
			from: "2024-01-01T00:00:00Z", want: []string{"2024-01-01T09:00:00Z", "2024-01-02T09:00:00Z"},
		},
		{
			name: "a named time zone puts the slots at local wall-clock time", schedule: "0 9 * * *", zone: "Asia/Kolkata",
			from: "2024-01-01T00:00:00Z", want: []string{"2024-01-01T09:00:00+05:30", "2024-01-02T09:00:00+05:30"},
		},
		{
			name: "a time given in another zone is converted first", schedule: "0 9 * * *", zone: "Asia/Tokyo",
			from: "2024-01-01T08:30:00+09:00", want: []string{"2024-01-01T09:00:00+09:00"},
		},
		{
			name: "the @hourly descriptor runs on the hour", schedule: "@hourly",
			from: "2024-01-01T10:15:00Z", want: []string{"2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"},
		},
		{
			name: "the @daily descriptor runs at local midnight", schedule: "@daily", zone: "America/New_York",
			from: "2024-01-01T12:00:00Z", want: []string{"2024-01-02T00:00:00-05:00"},
		},
		{
			name: "the @weekly descriptor runs on Sunday at midnight", schedule: "@weekly",
			from: "2024-01-03T12:00:00Z", want: []string{"2024-01-07T00:00:00Z", "2024-01-14T00:00:00Z"},
		},
		{
			name: "the @monthly descriptor runs on the 1st at midnight", schedule: "@monthly",
			from: "2024-01-31T23:59:59Z", want: []string{"2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		},
		{
			name: "the @yearly descriptor runs on January 1st at midnight", schedule: "@yearly",
			from: "2024-01-01T00:00:00Z", want: []string{"2025-01-01T00:00:00Z"},
		},
		{
			name: "@every 90s is 90s after the whole second of t", schedule: "@every 90s",
			from: "2024-01-01T00:00:00.5Z", want: []string{"2024-01-01T00:01:30Z", "2024-01-01T00:03:00Z"},
		},
		{
			name: "a February 29 schedule finds 2104 across the non-leap year 2100", schedule: "0 0 29 2 *",
			from: "2097-03-01T00:00:00Z", want: []string{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"},
		},
		{
			name: "day of month and day of week both restricted match either, as in cron", schedule: "0 0 13 * 5",
			from: "2024-09-01T00:00:00Z", want: []string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z", "2024-09-20T00:00:00Z"},
		},
		{
			name: "a daily 02:30 in New York skips the spring-forward day, whose 02:30 does not exist", schedule: "30 2 * * *", zone: "America/New_York",
			from: "2024-03-09T03:00:00-05:00", want: []string{"2024-03-11T02:30:00-04:00"},
		},
		{
			name: "a daily 01:30 in New York runs twice on the fall-back day, one real hour apart", schedule: "30 1 * * *", zone: "America/New_York",
			from: "2024-11-02T12:00:00-04:00", want: []string{"2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00"},
		},
		{
			name: "a daily 02:30 in New York runs once on the fall-back day", schedule: "30 2 * * *", zone: "America/New_York",
			from: "2024-11-02T12:00:00-04:00", want: []string{"2024-11-03T02:30:00-05:00", "2024-11-04T02:30:00-05:00"},
		},
		{
			name: "an hourly schedule in New York goes from 01:00 to 03:00 at spring forward", schedule: "0 * * * *", zone: "America/New_York",
			from: "2024-03-10T00:30:00-05:00", want: []string{"2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00"},
		},
		{
			name: "an hourly schedule in New York runs 01:00 twice at fall back, one real hour apart", schedule: "0 * * * *", zone: "America/New_York",
			from: "2024-11-03T00:30:00-04:00", want: []string{"2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00", "2024-11-03T02:00:00-05:00"},
		},
		{
			name: "a daily 02:30 in Berlin skips the spring-forward day, whose 02:30 does not exist", schedule: "30 2 * * *", zone: "Europe/Berlin",
			from: "2024-03-30T03:00:00+01:00", want: []string{"2024-04-01T02:30:00+02:00"},
		},
		{
			name: "a daily 02:30 in Berlin runs twice on the fall-back day, one real hour apart", schedule: "30 2 * * *", zone: "Europe/Berlin",
			from: "2024-10-26T03:00:00+02:00", want: []string{"2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00", "2024-10-28T02:30:00+01:00"},
		},
		{
			name: "an hourly schedule in Berlin goes from 01:00 to 03:00 at spring forward", schedule: "0 * * * *", zone: "Europe/Berlin",
			from: "2024-03-31T00:30:00+01:00", want: []string{"2024-03-31T01:00:00+01:00", "2024-03-31T03:00:00+02:00"},
		},
		{
			name: "an hourly schedule in Berlin runs 02:00 twice at fall back, one real hour apart", schedule: "0 * * * *", zone: "Europe/Berlin",
			from: "2024-10-27T01:30:00+02:00", want: []string{"2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00", "2024-10-27T03:00:00+01:00"},
		},
		{
			name: "a 30-minute DST shift on Lord Howe Island does not produce a slot at a wrong wall-clock time", schedule: "45 1 * * *", zone: "Australia/Lord_Howe",
			from: "2024-10-06T01:45:00+10:30", want: []string{"2024-10-07T01:45:00+11:00"},
		},
		{
			name: "a midnight that does not exist (Sao Paulo 2018) skips that day", schedule: "0 0 * * *", zone: "America/Sao_Paulo",
			from: "2018-11-03T00:00:00-03:00", want: []string{"2018-11-05T00:00:00-02:00"},
		},
		{
			name: "a 30-minute fall back on Lord Howe Island does not skip the next midnight", schedule: "0 0 * * *", zone: "Australia/Lord_Howe",
			from: "2024-04-07T00:00:00+11:00", want: []string{"2024-04-08T00:00:00+10:30", "2024-04-09T00:00:00+10:30"},
		},
		{
			name: "a monthly schedule on the 31st crosses the day Apia skipped without hanging", schedule: "0 0 31 * *", zone: "Pacific/Apia",
			from: "2011-12-01T00:00:00-10:00", want: []string{"2011-12-31T00:00:00+14:00", "2012-01-31T00:00:00+14:00"},
		},
		{
			name: "a whole day that does not exist (Apia, 30 December 2011) has no slot", schedule: "0 12 * * *", zone: "Pacific/Apia",
			from: "2011-12-29T13:00:00-10:00", want: []string{"2011-12-31T12:00:00+14:00"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.schedule, tc.zone)
			from := at(tc.from)
			for i, w := range tc.want {
				got := s.Next(from)
				if !got.Equal(at(w)) {
					t.Fatalf("slot %d: Next(%s) = %s, want %s", i+1, show(from), show(got), w)
				}
				if !got.After(from) {
					t.Fatalf("slot %d: Next(%s) = %s is not strictly after", i+1, show(from), show(got))
				}
				from = got
			}
		})
	}
}

// TestNextIsRobfigNextWhereRobfigIsRight checks that Next gives what
// robfig/cron (and so the Kubernetes CronJob controller) gives, DST changes
// included, in zones where robfig/cron is right: DST shifts of a whole hour.
func TestNextIsRobfigNextWhereRobfigIsRight(t *testing.T) {
	exprs := []string{
		"0 * * * *", "30 2 * * *", "30 1 * * *", "0 0 * * *", "*/20 1-3 * * *", "15 0-3 * * 0,6",
		"30 6-16/4 * * 1-5", "0 0 13 * 5", "0 0 31 * *", "0 0 29 2 *", "@weekly", "@monthly", "@yearly",
	}
	zones := map[string]int{
		"UTC": 2024, "America/New_York": 2024, "Europe/Berlin": 2024, "Asia/Kolkata": 2024, "America/Sao_Paulo": 2018,
	}
	for zone, year := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, expr := range exprs {
			t.Run(fmt.Sprintf("%s in %s through %d gives robfig/cron's slots", expr, zone, year), func(t *testing.T) {
				s := mustParse(t, expr, zone)
				parsed, err := cron.ParseStandard(expr)
				if err != nil {
					t.Fatal(err)
				}
				ref := parsed.(*cron.SpecSchedule)
				ref.Location = loc
				// The whole year, or for the dense expressions (robfig/cron
				// is slow) the months around the DST changes.
				windows := [][2]time.Time{{time.Date(year, 1, 1, 0, 0, 0, 0, loc), time.Date(year+1, 1, 1, 0, 0, 0, 0, loc)}}
				switch expr {
				case "0 * * * *", "*/20 1-3 * * *":
					windows = [][2]time.Time{
						{time.Date(year, 2, 1, 0, 0, 0, 0, loc), time.Date(year, 4, 15, 0, 0, 0, 0, loc)},
						{time.Date(year, 10, 15, 0, 0, 0, 0, loc), time.Date(year, 11, 15, 0, 0, 0, 0, loc)},
					}
				case "0 0 29 2 *", "@yearly":
					windows[0][1] = windows[0][1].AddDate(8, 0, 0)
				}
				for _, w := range windows {
					a, b := w[0], w[0]
					for i := 0; !a.After(w[1]); i++ {
						a, b = s.Next(a), ref.Next(b)
						if !a.Equal(b) {
							t.Fatalf("slot %d after %s: Next gives %s, robfig/cron %s", i, show(w[0]), show(a), show(b))
						}
					}
				}
			})
		}
	}
}

func TestNextIsInTheScheduleZone(t *testing.T) {
	s := mustParse(t, "0 9 * * *", "Europe/Berlin")
	got := s.Next(at("2024-01-01T00:00:00Z"))
	if got.Location().String() != "Europe/Berlin" {
		t.Errorf("Next returned a time in %v, want Europe/Berlin", got.Location())
	}
	if s := mustParse(t, "0 9 * * *", ""); s.Next(at("2024-01-01T00:00:00+01:00")).Location() != time.UTC {
		t.Errorf("an empty time zone does not give UTC times")
	}
}

func TestDue(t *testing.T) {
	const (
		hourly = "0 * * * *"
		// T1 and T2 are consecutive slots of the hourly schedule.
		T1 = "2016-05-19T10:00:00Z"
		T2 = "2016-05-19T11:00:00Z"
		T3 = "2016-05-19T12:00:00Z"
	)
	cases := []struct {
		name     string
		schedule string
		zone     string
		earliest string
		deadline *time.Duration
		now      string

		wantDue     string
		wantMissed  int64
		wantTooLate bool
		wantNext    string
	}{
		// The CronJob controller's own cases.
		{
			name: "a schedule that never ran has nothing due before its first slot", schedule: hourly,
			earliest: "2016-05-19T09:50:00Z", now: "2016-05-19T09:53:00Z",
			wantNext: T1,
		},
		{
			name: "a schedule that never ran starts the most recent slot since creation", schedule: hourly,
			earliest: "2016-05-19T09:50:00Z", now: "2016-05-19T10:00:02Z",
			wantDue: T1, wantNext: T2,
		},
		{
			name: "a schedule that ran on time has nothing due until the next slot", schedule: hourly,
			earliest: T1, now: "2016-05-19T10:02:00Z",
			wantNext: T2,
		},
		{
			name: "a schedule that ran at the previous slot has the next slot due", schedule: hourly,
			earliest: T1, now: "2016-05-19T11:05:00Z",
			wantDue: T2, wantNext: T3,
		},
		{
			name: "a slot exactly at now is due", schedule: hourly,
			earliest: T1, now: T2,
			wantDue: T2, wantNext: T3,
		},
		{
			name: "a slot is due when now has a fraction of a second past it", schedule: hourly,
			earliest: T1, now: "2016-05-19T11:00:00.25Z",
			wantDue: T2, wantNext: T3,
		},
		{
			name: "two slots passed since the last run: the newest is due and the older one is missed", schedule: hourly,
			earliest: "2016-05-19T09:00:00Z", now: "2016-05-19T11:05:00Z",
			wantDue: T2, wantMissed: 1, wantNext: T3,
		},
		{
			name: "late within the starting deadline the slot is due and not too late", schedule: hourly,
			earliest: T1, deadline: dur(10 * time.Minute), now: "2016-05-19T11:05:00Z",
			wantDue: T2, wantNext: T3,
		},
		{
			name: "late past the starting deadline the newest slot is too late", schedule: hourly,
			earliest: T1, deadline: dur(10 * time.Minute), now: "2016-05-19T11:15:00Z",
			wantDue: T2, wantTooLate: true, wantNext: T3,
		},
		{
			name: "a slot exactly at the end of its starting deadline can still start", schedule: hourly,
			earliest: T1, deadline: dur(10 * time.Minute), now: "2016-05-19T11:10:00Z",
			wantDue: T2, wantNext: T3,
		},
		{
			name: "a slot one nanosecond past its starting deadline is too late", schedule: hourly,
			earliest: T1, deadline: dur(10 * time.Minute), now: "2016-05-19T11:10:00.000000001Z",
			wantDue: T2, wantTooLate: true, wantNext: T3,
		},
		{
			name: "a zero starting deadline lets a slot start only at its exact instant", schedule: hourly,
			earliest: T1, deadline: dur(0), now: T2,
			wantDue: T2, wantNext: T3,
		},
		{
			name: "a zero starting deadline makes a slot one second old too late", schedule: hourly,
			earliest: T1, deadline: dur(0), now: "2016-05-19T11:00:01Z",
			wantDue: T2, wantTooLate: true, wantNext: T3,
		},
		{
			name: "a negative starting deadline counts as zero", schedule: hourly,
			earliest: T1, deadline: dur(-time.Hour), now: T2,
			wantDue: T2, wantNext: T3,
		},
		{
			name: "with a deadline, slots before the deadline window still count as missed", schedule: hourly,
			earliest: "2016-05-19T06:00:00Z", deadline: dur(30 * time.Minute), now: "2016-05-19T11:20:00Z",
			wantDue: T2, wantMissed: 4, wantNext: T3,
		},
		{
			name: "ten days down with a two-hour deadline: the newest slot is due and all older ones are missed", schedule: hourly,
			earliest: "2016-05-19T09:00:00Z", deadline: dur(2 * time.Hour), now: "2016-05-29T11:00:00Z",
			wantDue: "2016-05-29T11:00:00Z", wantMissed: 241, wantNext: "2016-05-29T12:00:00Z",
		},
		{
			name: "ten days down without a deadline the newest slot is still found (the CronJob controller gives up here)", schedule: hourly,
			earliest: "2016-05-19T09:00:00Z", now: "2016-05-29T11:30:00Z",
			wantDue: "2016-05-29T11:00:00Z", wantMissed: 241, wantNext: "2016-05-29T12:00:00Z",
		},
		{
			name: "a complex schedule finds the newest slot across a weekend", schedule: "30 6-16/4 * * 1-5",
			earliest: "2021-04-30T14:30:00Z", now: "2021-05-03T11:00:00Z",
			wantDue: "2021-05-03T10:30:00Z", wantMissed: 1, wantNext: "2021-05-03T14:30:00Z",
		},
		{
			name: "a schedule with uneven gaps counts its missed slots exactly", schedule: "30 10,11,12 * * 1-5",
			earliest: "2021-04-29T12:30:00Z", now: "2021-05-04T11:00:00Z",
			wantDue: "2021-05-04T10:30:00Z", wantMissed: 6, wantNext: "2021-05-04T11:30:00Z",
		},
		{
			name: "a monthly schedule on the 31st skips the short months", schedule: "0 0 31 * *",
			earliest: "2024-01-31T00:00:00Z", now: "2024-08-01T00:00:00Z",
			wantDue: "2024-07-31T00:00:00Z", wantMissed: 2, wantNext: "2024-08-31T00:00:00Z",
		},
		{
			name: "a schedule restricting both day of month and day of week counts days matching either", schedule: "0 0 13 * 5",
			earliest: "2024-09-01T00:00:00Z", now: "2024-09-14T00:00:00Z",
			wantDue: "2024-09-13T00:00:00Z", wantMissed: 1, wantNext: "2024-09-20T00:00:00Z",
		},

		// Long gaps: counted, not iterated.
		{
			name: "every minute, down for 30 days, has the newest slot due and 43199 missed", schedule: "* * * * *",
			earliest: "2024-01-01T00:00:00Z", now: "2024-01-31T00:00:30Z",
			wantDue: "2024-01-31T00:00:00Z", wantMissed: 43199, wantNext: "2024-01-31T00:01:00Z",
		},
		{
			name: "every minute, down for 30 days with a 10s deadline, misses all 43200 slots", schedule: "* * * * *",
			earliest: "2024-01-01T00:00:00Z", deadline: dur(10 * time.Second), now: "2024-01-31T00:00:30Z",
			wantDue: "2024-01-31T00:00:00Z", wantMissed: 43199, wantTooLate: true, wantNext: "2024-01-31T00:01:00Z",
		},
		{
			name: "every minute, down for 50 years, is counted without visiting each slot", schedule: "* * * * *",
			earliest: "2000-01-01T00:00:00Z", now: "2050-01-01T00:00:00Z",
			wantDue: "2050-01-01T00:00:00Z", wantMissed: 18263*1440 - 1, wantNext: "2050-01-01T00:01:00Z",
		},
		{
			name: "every minute in New York for all of 2024 counts real minutes across both DST changes", schedule: "* * * * *", zone: "America/New_York",
			earliest: "2024-01-01T00:00:00-05:00", now: "2025-01-01T00:00:00-05:00",
			wantDue: "2025-01-01T00:00:00-05:00", wantMissed: 366*1440 - 1, wantNext: "2025-01-01T00:01:00-05:00",
		},
		{
			name: "every minute since a zero creation time (year 1) is counted without visiting each slot", schedule: "* * * * *",
			earliest: "0001-01-01T00:00:00Z", now: "2024-06-01T00:00:00Z",
			wantDue: "2024-06-01T00:00:00Z", wantMissed: 739037*1440 - 1, wantNext: "2024-06-01T00:01:00Z",
		},
		{
			name: "a yearly schedule down for a decade misses nine slots", schedule: "@yearly",
			earliest: "2010-01-01T00:00:00Z", now: "2020-06-01T00:00:00Z",
			wantDue: "2020-01-01T00:00:00Z", wantMissed: 9, wantNext: "2021-01-01T00:00:00Z",
		},
		{
			name: "a February 29 schedule down across 2100 counts only real leap days", schedule: "0 0 29 2 *",
			earliest: "2092-02-29T00:00:00Z", now: "2105-01-01T00:00:00Z",
			wantDue: "2104-02-29T00:00:00Z", wantMissed: 1, wantNext: "2108-02-29T00:00:00Z",
		},

		// The clock going backwards.
		{
			name: "a clock that went backwards yields nothing due and the next slot after earliest", schedule: hourly,
			earliest: T1, now: "2016-05-19T09:30:00Z",
			wantNext: T2,
		},
		{
			name: "a clock that went back past several slots never offers a slot again", schedule: hourly,
			earliest: "2016-05-19T15:00:00Z", now: T1,
			wantNext: "2016-05-19T16:00:00Z",
		},
		{
			name: "now equal to earliest yields nothing due", schedule: hourly,
			earliest: T1, now: T1,
			wantNext: T2,
		},

		// Daylight saving time.
		{
			name: "an hourly schedule in New York has 23 slots on the spring-forward day", schedule: hourly, zone: "America/New_York",
			earliest: "2024-03-10T00:00:00-05:00", now: "2024-03-11T00:00:00-04:00",
			wantDue: "2024-03-11T00:00:00-04:00", wantMissed: 22, wantNext: "2024-03-11T01:00:00-04:00",
		},
		{
			name: "an hourly schedule in New York has 25 slots on the fall-back day", schedule: hourly, zone: "America/New_York",
			earliest: "2024-11-03T00:00:00-04:00", now: "2024-11-04T00:00:00-05:00",
			wantDue: "2024-11-04T00:00:00-05:00", wantMissed: 24, wantNext: "2024-11-04T01:00:00-05:00",
		},
		{
			name: "a daily 02:30 in New York has nothing due on the spring-forward day", schedule: "30 2 * * *", zone: "America/New_York",
			earliest: "2024-03-09T02:30:00-05:00", now: "2024-03-10T12:00:00-04:00",
			wantNext: "2024-03-11T02:30:00-04:00",
		},
		{
			name: "a daily 02:30 in New York misses nothing across the spring-forward day", schedule: "30 2 * * *", zone: "America/New_York",
			earliest: "2024-03-09T02:30:00-05:00", now: "2024-03-11T03:00:00-04:00",
			wantDue: "2024-03-11T02:30:00-04:00", wantNext: "2024-03-12T02:30:00-04:00",
		},
		{
			name: "a daily 01:30 in New York that ran at the first 01:30 of the fall-back day has the second one due", schedule: "30 1 * * *", zone: "America/New_York",
			earliest: "2024-11-03T01:30:00-04:00", now: "2024-11-03T01:45:00-05:00",
			wantDue: "2024-11-03T01:30:00-05:00", wantNext: "2024-11-04T01:30:00-05:00",
		},
		{
			name: "a daily 02:30 in New York has one slot on the fall-back day", schedule: "30 2 * * *", zone: "America/New_York",
			earliest: "2024-11-02T02:30:00-04:00", now: "2024-11-04T00:00:00-05:00",
			wantDue: "2024-11-03T02:30:00-05:00", wantNext: "2024-11-04T02:30:00-05:00",
		},
		{
			name: "an hourly schedule in Berlin has 23 slots on the spring-forward day", schedule: hourly, zone: "Europe/Berlin",
			earliest: "2024-03-31T00:00:00+01:00", now: "2024-04-01T00:00:00+02:00",
			wantDue: "2024-04-01T00:00:00+02:00", wantMissed: 22, wantNext: "2024-04-01T01:00:00+02:00",
		},
		{
			name: "an hourly schedule in Berlin has 25 slots on the fall-back day", schedule: hourly, zone: "Europe/Berlin",
			earliest: "2024-10-27T00:00:00+02:00", now: "2024-10-28T00:00:00+01:00",
			wantDue: "2024-10-28T00:00:00+01:00", wantMissed: 24, wantNext: "2024-10-28T01:00:00+01:00",
		},
		{
			name: "a daily 02:30 in Berlin misses nothing across the spring-forward day", schedule: "30 2 * * *", zone: "Europe/Berlin",
			earliest: "2024-03-30T02:30:00+01:00", now: "2024-04-01T02:30:00+02:00",
			wantDue: "2024-04-01T02:30:00+02:00", wantNext: "2024-04-02T02:30:00+02:00",
		},
		{
			name: "a daily 02:30 in Berlin down over the fall-back day has the second 02:30 due and the first missed", schedule: "30 2 * * *", zone: "Europe/Berlin",
			earliest: "2024-10-26T02:30:00+02:00", now: "2024-10-28T00:00:00+01:00",
			wantDue: "2024-10-27T02:30:00+01:00", wantMissed: 1, wantNext: "2024-10-28T02:30:00+01:00",
		},
		{
			name: "the @daily descriptor in Tokyo has the newest local midnight due", schedule: "@daily", zone: "Asia/Tokyo",
			earliest: "2024-06-01T00:00:00+09:00", now: "2024-06-03T08:00:00+09:00",
			wantDue: "2024-06-03T00:00:00+09:00", wantMissed: 1, wantNext: "2024-06-04T00:00:00+09:00",
		},
		{
			name: "the @hourly descriptor behaves like 0 * * * *", schedule: "@hourly",
			earliest: T1, now: "2016-05-19T11:00:01Z",
			wantDue: T2, wantNext: T3,
		},

		// @every: slots are floor(earliest) + k*d.
		{
			name: "@every 90s has nothing due before its first slot after creation", schedule: "@every 90s",
			earliest: "2024-01-01T00:00:00Z", now: "2024-01-01T00:01:00Z",
			wantNext: "2024-01-01T00:01:30Z",
		},
		{
			name: "@every 90s anchors its slots at creation", schedule: "@every 90s",
			earliest: "2024-01-01T00:00:00Z", now: "2024-01-01T00:04:00Z",
			wantDue: "2024-01-01T00:03:00Z", wantMissed: 1, wantNext: "2024-01-01T00:04:30Z",
		},
		{
			name: "@every 90s anchors its slots at the last run", schedule: "@every 90s",
			earliest: "2024-01-01T00:03:00Z", now: "2024-01-01T00:04:30Z",
			wantDue: "2024-01-01T00:04:30Z", wantNext: "2024-01-01T00:06:00Z",
		},
		{
			name: "@every 90s rounds a creation time with a fraction of a second down", schedule: "@every 90s",
			earliest: "2024-01-01T00:00:00.7Z", now: "2024-01-01T00:01:30.2Z",
			wantDue: "2024-01-01T00:01:30Z", wantNext: "2024-01-01T00:03:00Z",
		},
		{
			name: "@every 90s down for a day past its deadline is too late and counts every missed slot", schedule: "@every 90s",
			earliest: "2024-01-01T00:00:00Z", deadline: dur(5 * time.Second), now: "2024-01-02T00:00:10Z",
			wantDue: "2024-01-02T00:00:00Z", wantMissed: 959, wantTooLate: true, wantNext: "2024-01-02T00:01:30Z",
		},
		{
			name: "@every 90s with a clock that went backwards yields nothing due and the slot after earliest", schedule: "@every 90s",
			earliest: "2024-01-01T00:03:00Z", now: "2024-01-01T00:01:00Z",
			wantNext: "2024-01-01T00:04:30Z",
		},
		{
			name: "@every ignores the time zone and DST", schedule: "@every 1h", zone: "America/New_York",
			earliest: "2024-03-10T01:30:00-05:00", now: "2024-03-10T03:45:00-04:00",
			wantDue: "2024-03-10T03:30:00-04:00", wantMissed: 0, wantNext: "2024-03-10T04:30:00-04:00",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.schedule, tc.zone)
			got := s.Due(at(tc.earliest), tc.deadline, at(tc.now))
			if !got.Due.Equal(at(tc.wantDue)) {
				t.Errorf("Due = %s, want %s", show(got.Due), show(at(tc.wantDue)))
			}
			if got.Missed != tc.wantMissed {
				t.Errorf("Missed = %d, want %d", got.Missed, tc.wantMissed)
			}
			if got.TooLate != tc.wantTooLate {
				t.Errorf("TooLate = %v, want %v", got.TooLate, tc.wantTooLate)
			}
			if !got.Next.Equal(at(tc.wantNext)) {
				t.Errorf("Next = %s, want %s", show(got.Next), show(at(tc.wantNext)))
			}
			// Invariants that hold for every input.
			now, earliest := at(tc.now), at(tc.earliest)
			if !got.Next.After(now) || !got.Next.After(earliest) {
				t.Errorf("Next %s is not after both now and earliest", show(got.Next))
			}
			if !got.Due.IsZero() {
				if !got.Due.After(earliest) || got.Due.After(now) {
					t.Errorf("Due %s is outside (earliest, now]", show(got.Due))
				}
				if n := s.Next(got.Due); !n.Equal(got.Next) {
					t.Errorf("Next(Due) = %s disagrees with Slots.Next = %s", show(n), show(got.Next))
				}
			}
		})
	}
}

// TestDueAgreesWithSteppingThroughNext checks Due (bisection and counting)
// against the plain definition: step through Next from earliest to now.
// The windows sit around DST changes of the zone, in random years.
func TestDueAgreesWithSteppingThroughNext(t *testing.T) {
	zones := []string{
		"UTC", "America/New_York", "Europe/Berlin", "Europe/Dublin", "America/Sao_Paulo",
		"Australia/Lord_Howe", "Pacific/Chatham", "Pacific/Apia", "Asia/Kathmandu", "America/St_Johns",
	}
	schedules := []struct {
		name, expr string
		// span bounds the random gap between earliest and now.
		span time.Duration
	}{
		{"every 7 minutes", "*/7 * * * *", 2 * 24 * time.Hour},
		{"hourly", "0 * * * *", 20 * 24 * time.Hour},
		{"a few times at night on weekends", "15 0-3 * * 0,6", 60 * 24 * time.Hour},
		{"daily at 02:30", "30 2 * * *", 400 * 24 * time.Hour},
		{"daily at 01:45", "45 1 * * *", 400 * 24 * time.Hour},
		{"daily at midnight", "0 0 * * *", 400 * 24 * time.Hour},
		{"weekdays every four hours from 06:30", "30 6-16/4 * * 1-5", 100 * 24 * time.Hour},
		{"the 13th and every Friday", "0 0 13 * 5", 3 * 365 * 24 * time.Hour},
		{"the 31st", "0 0 31 * *", 5 * 365 * 24 * time.Hour},
		{"weekly", "@weekly", 5 * 365 * 24 * time.Hour},
		{"every 90 seconds", "@every 90s", 2 * 24 * time.Hour},
	}
	rng := rand.New(rand.NewPCG(2024, 11))
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range schedules {
			name := fmt.Sprintf("%s in %s agrees with stepping through Next", sc.name, zone)
			t.Run(name, func(t *testing.T) {
				s := mustParse(t, sc.expr, zone)
				for range 8 {
					// A DST change (if the zone has one) of a year in 2008..2024.
					year := 2008 + rng.IntN(17)
					pivot := time.Date(year, time.Month(1+rng.IntN(12)), 1, 0, 0, 0, 0, loc)
					if _, end := pivot.ZoneBounds(); !end.IsZero() {
						pivot = end
					}
					span := int64(sc.span / time.Second)
					earliest := pivot.Add(-time.Duration(rng.Int64N(span)) * time.Second)
					if rng.IntN(2) == 0 {
						// Start at a slot, as after a run.
						earliest = s.Next(earliest)
					}
					now := earliest.Add(time.Duration(rng.Int64N(span)-span/10)*time.Second + time.Duration(rng.IntN(1e9)))
					var deadline *time.Duration
					if rng.IntN(2) == 0 {
						deadline = dur(time.Duration(rng.Int64N(span/4+1)) * time.Second)
					}
					got := s.Due(earliest, deadline, now)
					want := stepThrough(s, earliest, deadline, now)
					if !got.Due.Equal(want.Due) || got.Missed != want.Missed || got.TooLate != want.TooLate || !got.Next.Equal(want.Next) {
						t.Fatalf("Due(%s, %v, %s)\n got Due %s Missed %d TooLate %v Next %s\nwant Due %s Missed %d TooLate %v Next %s",
							show(earliest), deadline, show(now),
							show(got.Due), got.Missed, got.TooLate, show(got.Next),
							show(want.Due), want.Missed, want.TooLate, show(want.Next))
					}
				}
			})
		}
	}
}

// stepThrough is the definition of Due, one slot at a time.
func stepThrough(s *Schedule, earliest time.Time, deadline *time.Duration, now time.Time) Slots {
	var out Slots
	last := earliest
	if now.Before(earliest) {
		out.Next = s.Next(earliest)
		return out
	}
	var n int64
	for {
		next := s.Next(last)
		if next.After(now) {
			out.Next = next
			break
		}
		if !next.After(last) {
			panic("Next is not strictly increasing")
		}
		out.Due, last = next, next
		n++
	}
	if n > 1 {
		out.Missed = n - 1
	}
	if n > 0 && deadline != nil {
		out.TooLate = now.Sub(out.Due) > max(*deadline, 0)
	}
	return out
}

// TestNextMatchesTheWallClock checks Next around DST changes against an
// independent definition: every minute whose wall-clock reading in the
// zone matches, checked one real minute at a time.
func TestNextMatchesTheWallClock(t *testing.T) {
	type wall struct{ month, day, hour, minute, weekday int }
	schedules := []struct {
		expr  string
		match func(w wall) bool
	}{
		{"30 2 * * *", func(w wall) bool { return w.hour == 2 && w.minute == 30 }},
		{"30 1 * * *", func(w wall) bool { return w.hour == 1 && w.minute == 30 }},
		{"45 1 * * *", func(w wall) bool { return w.hour == 1 && w.minute == 45 }},
		{"0 * * * *", func(w wall) bool { return w.minute == 0 }},
		{"0 0 * * *", func(w wall) bool { return w.hour == 0 && w.minute == 0 }},
		{"*/20 1-3 * * *", func(w wall) bool { return w.hour >= 1 && w.hour <= 3 && w.minute%20 == 0 }},
	}
	// A year with DST changes per zone.
	zones := map[string]int{
		"America/New_York": 2024, "Europe/Berlin": 2024, "Australia/Lord_Howe": 2024,
		"America/Sao_Paulo": 2018, "Pacific/Apia": 2011, "Pacific/Chatham": 2024,
		"Europe/Dublin": 2024, "America/St_Johns": 2024,
	}
	for zone, year := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		// Every zone change of that year.
		var changes []time.Time
		for c := time.Date(year, 1, 1, 0, 0, 0, 0, loc); c.Year() == year; {
			_, end := c.ZoneBounds()
			if end.IsZero() {
				break
			}
			if end.Year() == year {
				changes = append(changes, end)
			}
			c = end
		}
		if len(changes) == 0 {
			t.Fatalf("%s has no zone change in %d", zone, year)
		}
		for _, sc := range schedules {
			t.Run(fmt.Sprintf("%s in %s around its %d DST changes matches the wall clock", sc.expr, zone, year), func(t *testing.T) {
				s := mustParse(t, sc.expr, zone)
				for _, change := range changes {
					from := change.Add(-26 * time.Hour).Truncate(time.Minute)
					to := change.Add(26 * time.Hour)
					var want []time.Time
					for m := from.Add(time.Minute); !m.After(to); m = m.Add(time.Minute) {
						l := m.In(loc)
						if l.Second() == 0 && sc.match(wall{int(l.Month()), l.Day(), l.Hour(), l.Minute(), int(l.Weekday())}) {
							want = append(want, m)
						}
					}
					var got []time.Time
					for n := s.Next(from); !n.After(to); n = s.Next(n) {
						got = append(got, n)
					}
					if len(got) != len(want) {
						t.Fatalf("around %s: Next gives %d slots, the wall clock %d\n got %v\nwant %v", show(change), len(got), len(want), got, want)
					}
					for i := range got {
						if !got[i].Equal(want[i]) {
							t.Fatalf("around %s: slot %d is %s, want %s", show(change), i, show(got[i]), show(want[i]))
						}
					}
					if c := s.countSlots(from.Unix(), to.Unix()); c != int64(len(want)) {
						t.Fatalf("around %s: counted %d slots, want %d", show(change), c, len(want))
					}
				}
			})
		}
	}
}

func BenchmarkDueEveryMinuteInNewYorkSinceYearOne(b *testing.B) {
	s, err := Parse("* * * * *", "America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	now := at("2024-06-01T12:00:30Z")
	for b.Loop() {
		s.Due(time.Time{}, nil, now)
	}
}

func BenchmarkDueHourlyInBerlinAfterAMonth(b *testing.B) {
	s, err := Parse("0 * * * *", "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	earliest, now := at("2024-05-01T12:00:00Z"), at("2024-06-01T12:30:00Z")
	for b.Loop() {
		s.Due(earliest, nil, now)
	}
}

func BenchmarkNextDailyInBerlin(b *testing.B) {
	s, err := Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	from := at("2024-06-01T12:00:00Z")
	for b.Loop() {
		s.Next(from)
	}
}
