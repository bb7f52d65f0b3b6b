package params

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestResolve(t *testing.T) {
	spec := []v1alpha1.ParamSpec{{Name: "date"}, {Name: "region", Default: ptr.To("eu")}, {Name: "note", Default: ptr.To("")}}
	for _, tc := range []struct {
		name    string
		spec    []v1alpha1.ParamSpec
		raw     string
		want    map[string]string
		wantErr string
	}{
		{name: "given values win over defaults, defaults fill the rest", spec: spec, raw: `{"date":"2026-11-30","region":"us"}`,
			want: map[string]string{"date": "2026-11-30", "region": "us", "note": ""}},
		{name: "no annotation on a Task without required params gives the defaults", spec: spec[1:],
			want: map[string]string{"region": "eu", "note": ""}},
		{name: "no params declared and none given is no values", want: nil},
		{name: "a required param not given is refused naming it", spec: spec, raw: `{"region":"us"}`, wantErr: `no value for required params "date"`},
		{name: "no annotation with a required param is refused", spec: spec, wantErr: `no value for required params "date"`},
		{name: "an unknown name is refused naming it and the declared ones", spec: spec, raw: `{"date":"x","dat":"y"}`,
			wantErr: `unknown params "dat": spec.params declares "date", "region", "note"`},
		{name: "a value that is not a string is refused", spec: spec, raw: `{"date":5}`, wantErr: `the value of "date" is not a string`},
		{name: "an annotation that is not JSON is refused", spec: spec, raw: `date=x`, wantErr: "is not a JSON object of strings"},
		{name: "a JSON array is refused", spec: spec, raw: `["x"]`, wantErr: "is not a JSON object of strings"},
		{name: "a value over 1 KiB is refused", spec: spec, raw: `{"date":"` + strings.Repeat("é", 513) + `"}`, wantErr: "1026 bytes, over the 1024 allowed"},
		{name: "values over 4 KiB in all are refused", spec: []v1alpha1.ParamSpec{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}},
			raw:     `{"a":"` + strings.Repeat("x", 1000) + `","b":"` + strings.Repeat("x", 1000) + `","c":"` + strings.Repeat("x", 1000) + `","d":"` + strings.Repeat("x", 1000) + `","e":"` + strings.Repeat("x", 100) + `"}`,
			wantErr: "4105 bytes in all (names included), over the 4096 allowed"},
		{name: "a hostile value is kept verbatim", spec: spec, raw: `{"date":"$(rm -rf /) \"q\" 'q'\n` + "`id`" + `"}`,
			want: map[string]string{"date": "$(rm -rf /) \"q\" 'q'\n`id`", "region": "eu", "note": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.spec, tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("values (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want, Decode(Encode(got))); d != "" {
				t.Errorf("values through a Job annotation (-want +got):\n%s", d)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	values := map[string]string{"date": "2026-11-30", "q": "a b&c=d/é?#"}
	for _, tc := range []struct{ name, text, want string }{
		{"a url gets each value percent-encoded", "https://x.test/r/$(params.q)?d=$(params.date)&q=$(params.q)",
			"https://x.test/r/a%20b%26c%3Dd%2F%C3%A9%3F%23?d=2026-11-30&q=a%20b%26c%3Dd%2F%C3%A9%3F%23"},
		{"an unknown reference is left alone", "$(params.other)", "$(params.other)"},
		{"text without references is unchanged", "plain $(env.x)", "plain $(env.x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Substitute(tc.text, values, InURL); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := Substitute(`{"d":"$(params.q)"}`, values, Verbatim); got != `{"d":"a b&c=d/é?#"}` {
		t.Errorf("a body gets values verbatim: %q", got)
	}
	if d := cmp.Diff([]string{"regoin"}, Undeclared([]v1alpha1.ParamSpec{{Name: "region"}}, "$(params.region)/$(params.regoin)/$(params.regoin)")); d != "" {
		t.Errorf("undeclared (-want +got):\n%s", d)
	}
	if got := EnvName("report_date"); got != "TASK_PARAM_REPORT_DATE" {
		t.Errorf("EnvName: %s", got)
	}
}
