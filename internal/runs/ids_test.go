package runs

import (
	"testing"
	"time"
)

func TestRunIDs(t *testing.T) {
	// sha256("abc"), from FIPS 180-2 appendix B.1.
	const abcSHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

	tests := []struct {
		name string
		got  string
		want string
	}{
		{"the one-shot run id is 0", OneShot, "0"},
		{"a scheduled run id is s and the slot's unix seconds", ScheduledID(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), "s1767225600"},
		{"a scheduled run id does not depend on the slot's time zone", ScheduledID(time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600))), "s1767225600"},
		{"the token hash is the full lowercase hex sha256", TokenHash("abc"), abcSHA256},
		{"the token hash of an empty token is sha256 of nothing", TokenHash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"a run-now run id is m and the first 10 hex digits of the token hash", RunNowID("abc"), "m" + abcSHA256[:10]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestSlotOfReadsBackAScheduledID(t *testing.T) {
	slot := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, ok := SlotOf(ScheduledID(slot))
	if !ok || !got.Equal(slot) {
		t.Errorf("SlotOf(ScheduledID(%s)) = %s, %v", slot, got, ok)
	}
	for _, id := range []string{OneShot, RunNowID("abc"), "s", "sx1", ""} {
		if _, ok := SlotOf(id); ok {
			t.Errorf("SlotOf(%q) found a slot", id)
		}
	}
}

func TestOnlyRunNowIDsAreRunNow(t *testing.T) {
	if !IsRunNow(RunNowID("abc")) {
		t.Error("a run-now id is not run-now")
	}
	for _, id := range []string{OneShot, ScheduledID(time.Unix(0, 0)), ""} {
		if IsRunNow(id) {
			t.Errorf("%q counts as run-now", id)
		}
	}
}
