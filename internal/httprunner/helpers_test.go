package httprunner

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/results"
)

// envOf turns a map into a getenv function.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runOutput is what one Run produced.
type runOutput struct {
	code        int
	stdout      string
	termination string
	// data is the structured line of the termination message; results its
	// results block.
	data    ResultData
	results map[string]string
}

// run runs the runner like the pod does, with the termination message
// redirected to a temporary file, and checks what holds for every run: the
// termination message is the stdout text and fits the 1 KiB the operator
// keeps.
func run(t *testing.T, env map[string]string) runOutput {
	t.Helper()
	return runCtx(t, context.Background(), env)
}

func runCtx(t *testing.T, ctx context.Context, env map[string]string) runOutput {
	t.Helper()
	e := map[string]string{}
	for k, v := range env {
		e[k] = v
	}
	path := filepath.Join(t.TempDir(), "termination-log")
	e[EnvTerminationLog] = path
	var stdout bytes.Buffer
	code := Run(ctx, envOf(e), &stdout)
	term, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("termination message not written: %v", err)
	}
	out := runOutput{code: code, stdout: stdout.String(), termination: string(term)}
	rest, values, _, _ := results.Parse(out.termination)
	summary, data, _ := ParseResultData(rest)
	out.data, out.results = data, values
	if summary != out.stdout {
		t.Errorf("termination message (without its structured line) differs from stdout:\n%s\n---\n%s", summary, out.stdout)
	}
	if len(summary) >= 1024 || len(summary) > MaxSummaryBytes {
		t.Errorf("the summary is %d bytes, want at most %d", len(summary), MaxSummaryBytes)
	}
	t.Logf("exit %d, summary:\n%s", code, out.stdout)
	return out
}

// newServer starts a plain HTTP test server closed at the end of the test.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// testDone is closed when the test ends, before the servers it started are
// closed (cleanups run last-registered first): handlers that block select on
// it, so a test server can always shut down.
func testDone(t *testing.T) <-chan struct{} {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return done
}

// hang is a handler that never answers until the client goes away or the
// test ends.
func hang(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

// closedPort returns an address on which nothing listens: a listener's port
// just after it was closed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// hijack answers with raw bytes, for responses net/http would not write.
func hijack(t *testing.T, raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		buf.WriteString(raw)
		buf.Flush()
	}
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func mustNotContain(t *testing.T, out string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if u != "" && strings.Contains(out, u) {
			t.Errorf("output contains %q:\n%s", u, out)
		}
	}
}
