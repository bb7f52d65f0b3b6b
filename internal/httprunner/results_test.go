package httprunner

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResultsComeFromTheStatusAHeaderAndTheJSONBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v42"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		// Longer than the excerpt: a result may read further.
		_, _ = w.Write([]byte(`{"pad":"` + strings.Repeat("x", 2*MaxExcerptBytes) + `","id":"job-7","items":[{"name":"a"},{"name":"b"}],"n":3}`))
	}))
	defer srv.Close()
	out := run(t, map[string]string{
		EnvURL: srv.URL, EnvMethod: "POST",
		ResultNameEnv(0): "code", ResultFromEnv(0): "statusCode",
		ResultNameEnv(1): "etag", ResultFromEnv(1): "header:etag",
		ResultNameEnv(2): "id", ResultFromEnv(2): "jsonPath:{.id}",
		ResultNameEnv(3): "second", ResultFromEnv(3): "jsonPath:{.items[1].name}",
		ResultNameEnv(4): "n", ResultFromEnv(4): "jsonPath:{.n}",
		ResultNameEnv(5): "missing", ResultFromEnv(5): "header:X-Nope",
	})
	if out.code != ExitSuccess {
		t.Fatalf("exit %d:\n%s", out.code, out.stdout)
	}
	want := map[string]string{"code": "201", "etag": `"v42"`, "id": "job-7", "second": "b", "n": "3"}
	if d := cmp.Diff(want, out.results); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if !strings.Contains(out.stdout, "result missing: the response has no X-Nope header") {
		t.Errorf("the summary does not say which result is missing:\n%s", out.stdout)
	}
}

func TestABodyThatIsNotJSONLeavesItsResultsOutWithoutFailingTheRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html>ok</html>"))
	}))
	defer srv.Close()
	out := run(t, map[string]string{EnvURL: srv.URL,
		ResultNameEnv(0): "id", ResultFromEnv(0): "jsonPath:{.id}", ResultNameEnv(1): "code", ResultFromEnv(1): "statusCode"})
	if out.code != ExitSuccess {
		t.Fatalf("exit %d, want success:\n%s", out.code, out.stdout)
	}
	if d := cmp.Diff(map[string]string{"code": "200"}, out.results); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if !strings.Contains(out.stdout, "result id: the body is not JSON") {
		t.Errorf("summary:\n%s", out.stdout)
	}
}

func TestABadResultDefinitionIsNotRetryable(t *testing.T) {
	out := run(t, map[string]string{EnvURL: "http://127.0.0.1:9/", ResultNameEnv(0): "id", ResultFromEnv(0): "jsonPath:{.id"})
	if out.code != ExitBadDefinition || !strings.Contains(out.stdout, "is not a JSONPath expression") {
		t.Errorf("exit %d:\n%s", out.code, out.stdout)
	}
	out = run(t, map[string]string{EnvURL: "http://127.0.0.1:9/", ResultNameEnv(0): "id", ResultFromEnv(0): "body"})
	if out.code != ExitBadDefinition || !strings.Contains(out.stdout, "is not statusCode, header:<Name> or jsonPath:<expression>") {
		t.Errorf("exit %d:\n%s", out.code, out.stdout)
	}
}

// Results are masked against Secret-backed values only: a long query value
// (a run's param, in the spec for all to read) comes back as it is, a
// Secret-backed header the server echoes does not.
func TestResultsMaskSecretsOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"q":%q,"auth":%q}`, r.URL.Query().Get("region"), r.Header.Get("X-Key"))
	}))
	defer srv.Close()
	out := run(t, map[string]string{EnvURL: srv.URL + "/?region=us-west-2-long",
		HeaderNameEnv(0): "X-Key", HeaderValueEnv(0): "k3y-from-a-secret", HeaderSensitiveEnv(0): "true",
		ResultNameEnv(0): "q", ResultFromEnv(0): "jsonPath:{.q}", ResultNameEnv(1): "auth", ResultFromEnv(1): "jsonPath:{.auth}"})
	if d := cmp.Diff(map[string]string{"q": "us-west-2-long", "auth": "***"}, out.results); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
}
