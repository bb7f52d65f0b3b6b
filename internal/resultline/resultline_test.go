package resultline

import "testing"

func TestTheLineRoundTripsAndIsFoundOnlyLast(t *testing.T) {
	msg := "result:    unexpected status (exit 1)\nstatus:    503\n" + Format(Data{RetryAfterSeconds: 7})
	rest, data, ok := Parse(msg)
	if !ok || data.RetryAfterSeconds != 7 || rest != "result:    unexpected status (exit 1)\nstatus:    503\n" {
		t.Fatalf("Parse = %q, %+v, %v", rest, data, ok)
	}
	if Format(Data{}) != "" {
		t.Fatal("an empty result has a line")
	}
	for _, s := range []string{"plain text from a shell script\n", "", Prefix + "{not json}\n", Format(Data{RetryAfterSeconds: 1}) + "a line after it\n"} {
		if rest, _, ok := Parse(s); ok || rest != s {
			t.Errorf("Parse(%q) = %q, ok %v; want no line found", s, rest, ok)
		}
	}
}
