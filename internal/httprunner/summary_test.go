package httprunner

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEscapeTextKeepsTheExcerptOnOneReadableLine(t *testing.T) {
	cases := []struct {
		name        string
		in          string
		max         int
		dropPartial bool
		want        string
		consumed    int
	}{
		{"printable ASCII is kept", `{"a": 1}`, 100, false, `{"a": 1}`, 8},
		{"line breaks and tabs are escaped", "a\nb\r\tc", 100, false, `a\nb\r\tc`, 6},
		{"control bytes are escaped", "a\x00\x1b\x7f", 100, false, `a\x00\x1b\x7f`, 4},
		{"invalid UTF-8 is escaped byte by byte", "a\xff\xfe", 100, false, `a\xff\xfe`, 3},
		{"non-ASCII text stays readable", "héllo 世界", 100, false, "héllo 世界", len("héllo 世界")},
		{"unprintable runes are escaped", "a\u2028b\u00a0", 100, false, `a\u2028b\u00a0`, len("a\u2028b\u00a0")},
		{"output stops before exceeding the budget", "abcdef", 4, false, "abcd", 4},
		{"an escape is not split by the budget", "ab\x00", 4, false, "ab", 2},
		{"an incomplete character at the end of a cut body is dropped", "ab\xe4\xb8", 100, true, "ab", 2},
		{"an incomplete character is escaped when the body was not cut", "ab\xe4\xb8", 100, false, `ab\xe4\xb8`, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n := escapeText(tc.in, tc.max, tc.dropPartial)
			if got != tc.want || n != tc.consumed {
				t.Errorf("escapeText(%q, %d) = %q, %d; want %q, %d", tc.in, tc.max, got, n, tc.want, tc.consumed)
			}
		})
	}
}

func TestSummaryShowsWhatHappened(t *testing.T) {
	cases := []struct {
		name string
		res  Result
		want string
	}{
		{
			name: "a success shows request, status, latency and body",
			res: Result{ExitCode: 0, Method: "GET", URL: "https://example.com/health", StatusCode: 200, Status: "200 OK",
				Expected: "any 2xx", ContentLength: 2, Body: []byte("ok"), Latency: 12345 * time.Microsecond},
			want: "result:    success (exit 0)\nrequest:   GET https://example.com/health\nstatus:    200 OK\nlatency:   12.3ms\nbody:      ok\n",
		},
		{
			name: "an unexpected status says which codes were expected",
			res: Result{ExitCode: 1, Method: "POST", URL: "https://example.com/hook?token=***", StatusCode: 500,
				Status: "500 Internal Server Error", Expected: "200, 201", ContentLength: -1, Latency: 2 * time.Second},
			want: "result:    unexpected status (exit 1)\nrequest:   POST https://example.com/hook?token=***\nstatus:    500 Internal Server Error (expected 200, 201)\nlatency:   2s\nbody:      (empty)\n",
		},
		{
			name: "an error without response shows the error",
			res: Result{ExitCode: 4, Method: "GET", URL: "http://127.0.0.1:1/", Err: "cannot connect to 127.0.0.1:1: connection refused",
				ContentLength: -1, Latency: 300 * time.Microsecond},
			want: "result:    connection error (exit 4)\nrequest:   GET http://127.0.0.1:1/\nlatency:   300µs\nerror:     cannot connect to 127.0.0.1:1: connection refused\n",
		},
		{
			name: "a bad definition says it is not retried",
			res:  Failure(ExitBadDefinition, `TASK_HTTP_METHOD "FETCH" is not one of GET`),
			want: "result:    bad request definition (exit 2, not retried)\nerror:     TASK_HTTP_METHOD \"FETCH\" is not one of GET\n",
		},
		{
			name: "a HEAD response has no body line",
			res:  Result{Method: "HEAD", URL: "http://h/", StatusCode: 200, Status: "200 OK", ContentLength: 100},
			want: "result:    success (exit 0)\nrequest:   HEAD http://h/\nstatus:    200 OK\nlatency:   0s\n",
		},
		{
			name: "a truncated body says how long it is",
			res: Result{Method: "GET", URL: "http://h/", StatusCode: 200, Status: "200 OK", ContentLength: 52428800,
				Body: []byte("xxxx"), BodyTruncated: true},
			want: "result:    success (exit 0)\nrequest:   GET http://h/\nstatus:    200 OK\nlatency:   0s\nbody:      xxxx... (truncated; the body is 52428800 bytes)\n",
		},
		{
			name: "a truncated body of unknown length says only the beginning was read",
			res: Result{Method: "GET", URL: "http://h/", StatusCode: 200, Status: "200 OK", ContentLength: -1,
				Body: []byte("xxxx"), BodyTruncated: true},
			want: "result:    success (exit 0)\nrequest:   GET http://h/\nstatus:    200 OK\nlatency:   0s\nbody:      xxxx... (truncated; only the first 512 bytes were read)\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.res.Summary(); got != tc.want {
				t.Errorf("Summary() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSummaryNeverExceedsTheBound(t *testing.T) {
	long := strings.Repeat("a", 5000)
	binary := strings.Repeat("\x00", MaxExcerptBytes)
	red := newRedactor([]string{"x"}) // a one-byte secret makes masking grow the text
	cases := []struct {
		name string
		res  Result
	}{
		{"every field at its largest", Result{ExitCode: 1, Method: "OPTIONS", URL: "http://h/" + long, Redirects: 5,
			FinalURL: "http://h/" + long, StatusCode: 500, Status: "500 " + long, Expected: "any 2xx", Err: long,
			Notes: []string{long, long, long}, Body: []byte(binary), BodyTruncated: true, ContentLength: 1 << 40}},
		{"a body that escapes to four times its size", Result{Method: "GET", URL: "http://h/", StatusCode: 200,
			Status: "200 OK", Body: []byte(binary), BodyTruncated: true, ContentLength: -1}},
		{"masking that lengthens the text", Result{Method: "GET", URL: "http://h/" + strings.Repeat("x", 150), StatusCode: 200,
			Status: "200 OK", Body: []byte(strings.Repeat("x", 512)), Err: strings.Repeat("x", 400), redact: red}},
		{"multi-byte characters at the cut", Result{Method: "GET", URL: "http://h/", StatusCode: 200, Status: "200 OK",
			Err: strings.Repeat("世", 500), Body: []byte(strings.Repeat("界", 170))}},
		{"a huge definition error", Failure(ExitBadDefinition, long)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.res.Summary()
			if len(s) > MaxSummaryBytes {
				t.Errorf("summary is %d bytes, want at most %d", len(s), MaxSummaryBytes)
			}
			if !utf8.ValidString(s) {
				t.Errorf("summary is not valid UTF-8")
			}
			if !strings.HasPrefix(s, "result:") || !strings.HasSuffix(s, "\n") {
				t.Errorf("summary lost its first line or final newline:\n%s", s)
			}
		})
	}
}

func TestFormatLatencyRoundsForReading(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850*time.Microsecond + 400:  "850µs",
		12*time.Millisecond + 34567: "12ms",
		1234567 * time.Microsecond:  "1.235s",
	} {
		if got := formatLatency(d); got != want {
			t.Errorf("formatLatency(%v) = %q, want %q", d, got, want)
		}
	}
}

// The summary format shown in docs/http-tasks.md.
func ExampleResult_Summary() {
	res := Result{
		ExitCode: ExitUnexpectedStatus, Method: "POST",
		URL:        "https://api.example.com/v1/hooks?token=***",
		StatusCode: 503, Status: "503 Service Unavailable", Expected: "any 2xx",
		ContentLength: 47, Body: []byte("{\"error\":\"maintenance\",\n \"retry_after\":\"120\"}\n"),
		Latency: 41200 * time.Microsecond,
	}
	fmt.Print(res.Summary())
	// Output:
	// result:    unexpected status (exit 1)
	// request:   POST https://api.example.com/v1/hooks?token=***
	// status:    503 Service Unavailable (expected any 2xx)
	// latency:   41.2ms
	// body:      {"error":"maintenance",\n "retry_after":"120"}\n
}
