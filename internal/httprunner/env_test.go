package httprunner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseEnvReadsTheRequestDefinition(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Request // URL is compared through RawURL only
	}{
		{
			name: "only a URL gives GET, a 30 s timeout, any 2xx and no headers",
			env:  map[string]string{EnvURL: "https://example.com/hook"},
			want: Request{RawURL: "https://example.com/hook", Method: "GET", Timeout: 30 * time.Second},
		},
		{
			name: "every variable is read",
			env: map[string]string{
				EnvURL: "http://example.com/x", EnvMethod: "POST", EnvBody: `{"a":1}`,
				EnvSuccessCodes: " 200, 202 ,404", EnvTimeoutSeconds: "5",
				"TASK_HTTP_HEADER_0_NAME": "Content-Type", "TASK_HTTP_HEADER_0_VALUE": "application/json",
				"TASK_HTTP_HEADER_1_NAME": "Authorization", "TASK_HTTP_HEADER_1_VALUE": "Bearer t0k", "TASK_HTTP_HEADER_1_SENSITIVE": "true",
			},
			want: Request{
				RawURL: "http://example.com/x", Method: "POST", Body: `{"a":1}`,
				SuccessCodes: []int{200, 202, 404}, Timeout: 5 * time.Second,
				Headers: []Header{
					{Name: "Content-Type", Value: "application/json"},
					{Name: "Authorization", Value: "Bearer t0k", Sensitive: true},
				},
			},
		},
		{
			name: "headers stop at the first missing name",
			env: map[string]string{
				EnvURL:                    "http://example.com/",
				"TASK_HTTP_HEADER_0_NAME": "A", "TASK_HTTP_HEADER_0_VALUE": "1",
				"TASK_HTTP_HEADER_1_NAME": "B", "TASK_HTTP_HEADER_1_VALUE": "2",
				"TASK_HTTP_HEADER_3_NAME": "D", "TASK_HTTP_HEADER_3_VALUE": "4",
			},
			want: Request{RawURL: "http://example.com/", Method: "GET", Timeout: 30 * time.Second,
				Headers: []Header{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}},
		},
		{
			name: "a header may have an empty value and SENSITIVE=false is not sensitive",
			env: map[string]string{
				EnvURL:                    "http://example.com/",
				"TASK_HTTP_HEADER_0_NAME": "X-Empty", "TASK_HTTP_HEADER_0_SENSITIVE": "false",
			},
			want: Request{RawURL: "http://example.com/", Method: "GET", Timeout: 30 * time.Second,
				Headers: []Header{{Name: "X-Empty"}}},
		},
		{
			name: "duplicate success codes are kept once",
			env:  map[string]string{EnvURL: "http://example.com/", EnvSuccessCodes: "204,204"},
			want: Request{RawURL: "http://example.com/", Method: "GET", Timeout: 30 * time.Second, SuccessCodes: []int{204}},
		},
		{
			name: "the largest timeout is accepted",
			env:  map[string]string{EnvURL: "http://example.com/", EnvTimeoutSeconds: "3600"},
			want: Request{RawURL: "http://example.com/", Method: "GET", Timeout: time.Hour},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv(envOf(tc.env))
			if err != nil {
				t.Fatalf("ParseEnv: %v", err)
			}
			if got.URL == nil || got.URL.String() != tc.want.RawURL {
				t.Errorf("URL = %v, want %s", got.URL, tc.want.RawURL)
			}
			got.URL = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnvRefusesABadDefinition(t *testing.T) {
	const okURL = "http://example.com/"
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"a missing URL is refused", map[string]string{}, []string{"TASK_HTTP_URL is missing"}},
		{"a URL without scheme is refused", map[string]string{EnvURL: "example.com/x"}, []string{"absolute http:// or https://"}},
		{"a relative URL is refused", map[string]string{EnvURL: "/x"}, []string{"absolute http:// or https://"}},
		{"an ftp URL is refused", map[string]string{EnvURL: "ftp://example.com/"}, []string{`not "ftp://"`}},
		{"a URL without host is refused", map[string]string{EnvURL: "http:///path"}, []string{"has no host"}},
		{"a URL with a space in the host is refused", map[string]string{EnvURL: "http://exa mple.com/"}, []string{"not a valid URL", "invalid character"}},
		{"a URL with a bad port is refused", map[string]string{EnvURL: "http://example.com:port/"}, []string{"not a valid URL", "invalid port"}},
		{"a malformed URL's error does not repeat the URL and its credentials", map[string]string{EnvURL: "http://user:pw-secret@exa mple.com/?token=tok-secret"}, []string{"not a valid URL"}},
		{"an unknown method is refused", map[string]string{EnvURL: okURL, EnvMethod: "FETCH"}, []string{`TASK_HTTP_METHOD "FETCH" is not one of GET, HEAD`}},
		{"a lower-case method is refused", map[string]string{EnvURL: okURL, EnvMethod: "get"}, []string{`"get" is not one of`}},
		{"a method with a space is refused", map[string]string{EnvURL: okURL, EnvMethod: "GE T"}, []string{`"GE T"`}},
		{"a header name with a space is refused", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_NAME": "Bad Header", "TASK_HTTP_HEADER_0_VALUE": "v"}, []string{`TASK_HTTP_HEADER_0_NAME "Bad Header" is not a valid header name`}},
		{"a header name with a colon is refused", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_NAME": "X:Y"}, []string{"not a valid header name"}},
		{"a non-ASCII header name is refused", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_NAME": "Über"}, []string{"not a valid header name"}},
		{"a header value with a line break is refused without being quoted", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_NAME": "X-Token", "TASK_HTTP_HEADER_0_VALUE": "tok-secret\r\nX-Injected: 1", "TASK_HTTP_HEADER_0_SENSITIVE": "true"}, []string{`TASK_HTTP_HEADER_0_VALUE (header "X-Token") contains a line break`}},
		{"a header value without its name is refused", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_VALUE": "v"}, []string{"TASK_HTTP_HEADER_0_VALUE is set but TASK_HTTP_HEADER_0_NAME is missing"}},
		{"a SENSITIVE flag that is not a boolean is refused", map[string]string{EnvURL: okURL, "TASK_HTTP_HEADER_0_NAME": "A", "TASK_HTTP_HEADER_0_SENSITIVE": "yes"}, []string{`TASK_HTTP_HEADER_0_SENSITIVE "yes" is not true or false`}},
		{"a success code that is not a number is refused", map[string]string{EnvURL: okURL, EnvSuccessCodes: "2xx"}, []string{`TASK_HTTP_SUCCESS_CODES entry "2xx" is not a status code`}},
		{"an empty success code entry is refused", map[string]string{EnvURL: okURL, EnvSuccessCodes: "200,,201"}, []string{`entry "" is not a status code`}},
		{"a success code below 100 is refused", map[string]string{EnvURL: okURL, EnvSuccessCodes: "99"}, []string{`entry "99"`}},
		{"a success code above 599 is refused", map[string]string{EnvURL: okURL, EnvSuccessCodes: "200,600"}, []string{`entry "600"`}},
		{"a zero timeout is refused", map[string]string{EnvURL: okURL, EnvTimeoutSeconds: "0"}, []string{`TASK_HTTP_TIMEOUT_SECONDS "0" is not a whole number of seconds between 1 and 3600`}},
		{"a negative timeout is refused", map[string]string{EnvURL: okURL, EnvTimeoutSeconds: "-1"}, []string{`"-1"`}},
		{"a fractional timeout is refused", map[string]string{EnvURL: okURL, EnvTimeoutSeconds: "1.5"}, []string{`"1.5"`}},
		{"a timeout with a unit is refused", map[string]string{EnvURL: okURL, EnvTimeoutSeconds: "30s"}, []string{`"30s"`}},
		{"a timeout above an hour is refused", map[string]string{EnvURL: okURL, EnvTimeoutSeconds: "3601"}, []string{`"3601"`}},
		{"every problem is reported at once", map[string]string{EnvMethod: "FETCH", EnvTimeoutSeconds: "x", EnvSuccessCodes: "ok"},
			[]string{"TASK_HTTP_URL is missing", "TASK_HTTP_METHOD", "TASK_HTTP_TIMEOUT_SECONDS", "TASK_HTTP_SUCCESS_CODES"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnv(envOf(tc.env))
			if err == nil {
				t.Fatal("ParseEnv accepted the definition")
			}
			var de *DefinitionError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *DefinitionError", err)
			}
			mustContain(t, err.Error(), tc.want...)
			mustNotContain(t, err.Error(), "pw-secret", "tok-secret")
		})
	}
}

func TestParseEnvStopsScanningHeadersAtALimit(t *testing.T) {
	// A getenv that answers for every name must not loop forever.
	getenv := func(k string) string {
		if k == EnvURL {
			return "http://example.com/"
		}
		if strings.HasPrefix(k, "TASK_HTTP_HEADER_") && strings.HasSuffix(k, "_NAME") {
			return "X-A"
		}
		return ""
	}
	_, err := ParseEnv(getenv)
	if err == nil || !strings.Contains(err.Error(), "more than 256 headers") {
		t.Fatalf("err = %v, want the header limit", err)
	}
}
