package httprunner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunExitsWithTheCodeOfTheOutcome(t *testing.T) {
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		raw      string // a raw response, when handler is nil
		env      map[string]string
		wantCode int
		want     []string
	}{
		{
			name:     "a 200 is a success",
			handler:  func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") },
			wantCode: ExitSuccess,
			want:     []string{"result:    success (exit 0)", "status:    200 OK", "body:      hello", "latency:   "},
		},
		{
			name:     "a 204 without body is a success",
			handler:  func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
			wantCode: ExitSuccess,
			want:     []string{"status:    204 No Content", "body:      (empty)"},
		},
		{
			name:     "a 404 is a success when the success codes list it",
			handler:  func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			env:      map[string]string{EnvSuccessCodes: "200,404"},
			wantCode: ExitSuccess,
			want:     []string{"success (exit 0)", "status:    404 Not Found"},
		},
		{
			name:     "a 200 is refused when the success codes are only 201",
			handler:  func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "created? no") },
			env:      map[string]string{EnvSuccessCodes: "201"},
			wantCode: ExitUnexpectedStatus,
			want:     []string{"unexpected status (exit 1)", "status:    200 OK (expected 201)"},
		},
		{
			name: "a 500 exits 1 and names the status and the body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "database is down", http.StatusInternalServerError)
			},
			wantCode: ExitUnexpectedStatus,
			want:     []string{"unexpected status (exit 1)", "500 Internal Server Error (expected any 2xx)", `body:      database is down\n`},
		},
		{
			name:     "an unexpected 404 is a client error, exit 9, not worth retrying",
			handler:  func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			wantCode: ExitClientError,
			want:     []string{"client error (exit 9)", "404 Not Found (expected any 2xx)"},
		},
		{
			name: "a 422 is a client error too",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "bad field", http.StatusUnprocessableEntity)
			},
			wantCode: ExitClientError,
			want:     []string{"client error (exit 9)", "422 Unprocessable Entity"},
		},
		{
			name:     "a 429 says try again later: exit 1, retried",
			handler:  func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) },
			wantCode: ExitUnexpectedStatus,
			want:     []string{"unexpected status (exit 1)", "429 Too Many Requests"},
		},
		{
			name:     "a 408 says try again later: exit 1, retried",
			handler:  func(w http.ResponseWriter, r *http.Request) { http.Error(w, "too slow", http.StatusRequestTimeout) },
			wantCode: ExitUnexpectedStatus,
			want:     []string{"unexpected status (exit 1)", "408 Request Timeout"},
		},
		{
			name: "a 3xx without Location is judged as a status, not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotModified)
			},
			wantCode: ExitUnexpectedStatus,
			want:     []string{"304 Not Modified (expected any 2xx)"},
		},
		{
			name:     "a HEAD request succeeds without reading a body",
			handler:  func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Content-Length", "100000") },
			env:      map[string]string{EnvMethod: "HEAD"},
			wantCode: ExitSuccess,
			want:     []string{"request:   HEAD ", "status:    200 OK"},
		},
		{
			name:     "a malformed response is a request failure",
			raw:      "this is not HTTP\r\n\r\n",
			wantCode: ExitRequestFailed,
			want:     []string{"request failed (exit 7)", "malformed HTTP"},
		},
		{
			name:     "a server closing the connection without answering is a connection error",
			wantCode: ExitConnection,
			want:     []string{"connection error (exit 4)", "closed the connection without sending a response"},
		},
		{
			name:     "a body shorter than announced is a connection error",
			raw:      "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart",
			wantCode: ExitConnection,
			want:     []string{"connection error (exit 4)", "status:    200 OK", "reading the response body: the server closed the connection before the response was complete", "body:      part"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.handler
			if h == nil {
				h = hijack(t, tc.raw)
			}
			var requests atomic.Int32
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				h(w, r)
			}))
			env := map[string]string{EnvURL: srv.URL + "/x"}
			for k, v := range tc.env {
				env[k] = v
			}
			out := run(t, env)
			if out.code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", out.code, tc.wantCode)
			}
			mustContain(t, out.stdout, tc.want...)
			if n := requests.Load(); n != 1 {
				t.Errorf("the server saw %d requests, want exactly 1 (no retries inside the runner)", n)
			}
		})
	}
}

func TestRunMakesOneRequestPerAttemptAndLeavesRetriesToTheOperator(t *testing.T) {
	// The server fails the first request and succeeds afterwards: the first
	// attempt must fail with exit 1 (so the operator retries), the second
	// succeed, and each make exactly one request.
	var requests atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ready")
	}))
	env := map[string]string{EnvURL: srv.URL}

	first := run(t, env)
	if first.code != ExitUnexpectedStatus || requests.Load() != 1 {
		t.Fatalf("first attempt: exit %d after %d requests, want exit 1 after 1", first.code, requests.Load())
	}
	mustContain(t, first.stdout, "500 Internal Server Error", "warming up")

	second := run(t, env)
	if second.code != ExitSuccess || requests.Load() != 2 {
		t.Fatalf("second attempt: exit %d after %d requests in all, want exit 0 after 2", second.code, requests.Load())
	}
	mustContain(t, second.stdout, "200 OK", "ready")
}

func TestRunRefusesABadDefinitionWithExitCode2(t *testing.T) {
	var requests atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a missing URL", map[string]string{}, "TASK_HTTP_URL is missing"},
		{"a malformed URL", map[string]string{EnvURL: "http://exa mple.com/"}, "TASK_HTTP_URL is not a valid URL"},
		{"a bad method", map[string]string{EnvURL: srv.URL, EnvMethod: "FETCH"}, `TASK_HTTP_METHOD "FETCH"`},
		{"a bad header name", map[string]string{EnvURL: srv.URL, "TASK_HTTP_HEADER_0_NAME": "Bad Header"}, "not a valid header name"},
		{"bad success codes", map[string]string{EnvURL: srv.URL, EnvSuccessCodes: "200;201"}, "TASK_HTTP_SUCCESS_CODES"},
		{"a bad timeout", map[string]string{EnvURL: srv.URL, EnvTimeoutSeconds: "0"}, "TASK_HTTP_TIMEOUT_SECONDS"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" exits 2 without sending anything", func(t *testing.T) {
			out := run(t, tc.env)
			if out.code != ExitBadDefinition {
				t.Errorf("exit code = %d, want %d", out.code, ExitBadDefinition)
			}
			mustContain(t, out.stdout, "result:    bad request definition (exit 2, not retried)", tc.want)
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the server saw %d requests, want none", n)
	}
}

func TestRunReportsATimeoutAgainstAHangingServer(t *testing.T) {
	cases := []struct {
		name    string
		handler func(done <-chan struct{}) http.HandlerFunc
		want    []string
	}{
		{
			name:    "a server that never answers times out",
			handler: hang,
			want:    []string{"timeout (exit 3)", "no complete response within 1s (timeoutSeconds)"},
		},
		{
			name: "a server that sends headers but never the body times out too",
			handler: func(done <-chan struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, "partial")
					w.(http.Flusher).Flush()
					hang(done)(w, r)
				}
			},
			want: []string{"timeout (exit 3)", "status:    200 OK", "reading the response body: no complete response within 1s", "body:      partial"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.handler(testDone(t)))
			start := time.Now()
			out := run(t, map[string]string{EnvURL: srv.URL, EnvTimeoutSeconds: "1"})
			if out.code != ExitTimeout {
				t.Errorf("exit code = %d, want %d", out.code, ExitTimeout)
			}
			mustContain(t, out.stdout, tc.want...)
			if d := time.Since(start); d < time.Second || d > 10*time.Second {
				t.Errorf("the run took %v, want about the 1 s timeout", d)
			}
		})
	}
}

func TestRunReportsConnectionErrors(t *testing.T) {
	t.Run("a refused connection exits 4 and names the address", func(t *testing.T) {
		t.Parallel()
		addr := closedPort(t)
		out := run(t, map[string]string{EnvURL: "http://" + addr + "/"})
		if out.code != ExitConnection {
			t.Errorf("exit code = %d, want %d", out.code, ExitConnection)
		}
		mustContain(t, out.stdout, "connection error (exit 4)", "cannot connect to "+addr, "refused")
	})
	t.Run("an unresolved host exits 4 and names the host", func(t *testing.T) {
		t.Parallel()
		out := run(t, map[string]string{EnvURL: "http://no-such-host.invalid/", EnvTimeoutSeconds: "20"})
		if out.code != ExitConnection {
			t.Errorf("exit code = %d, want %d", out.code, ExitConnection)
		}
		mustContain(t, out.stdout, "connection error (exit 4)", `cannot resolve host "no-such-host.invalid"`)
	})
}

func TestTLSIsVerifiedByDefault(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure hello")
	}))
	// The refused handshakes are the point of the test: keep the server
	// from logging them.
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	plain := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	t.Run("a certificate from an unknown authority fails with the TLS exit code", func(t *testing.T) {
		out := run(t, map[string]string{EnvURL: tlsSrv.URL})
		if out.code != ExitTLS {
			t.Errorf("exit code = %d, want %d", out.code, ExitTLS)
		}
		mustContain(t, out.stdout, "TLS error (exit 5)", "certificate signed by unknown authority")
	})
	t.Run("https to a plain HTTP port fails with the TLS exit code", func(t *testing.T) {
		out := run(t, map[string]string{EnvURL: strings.Replace(plain.URL, "http://", "https://", 1)})
		if out.code != ExitTLS {
			t.Errorf("exit code = %d, want %d", out.code, ExitTLS)
		}
		mustContain(t, out.stdout, "TLS error (exit 5)")
	})
	t.Run("a trusted certificate for another host name fails with the TLS exit code", func(t *testing.T) {
		// The test certificate is for 127.0.0.1 and example.com, not localhost.
		u, _ := url.Parse(tlsSrv.URL)
		req := mustParse(t, map[string]string{EnvURL: "https://localhost:" + u.Port() + "/"})
		res := Do(context.Background(), tlsSrv.Client(), req)
		if res.ExitCode != ExitTLS {
			t.Errorf("exit code = %d, want %d; %s", res.ExitCode, ExitTLS, res.Summary())
		}
		mustContain(t, res.Summary(), "localhost")
	})
	t.Run("https succeeds with a client that trusts the server's CA", func(t *testing.T) {
		req := mustParse(t, map[string]string{EnvURL: tlsSrv.URL + "/hello"})
		res := Do(context.Background(), tlsSrv.Client(), req)
		if res.ExitCode != ExitSuccess {
			t.Errorf("exit code = %d, want %d; %s", res.ExitCode, ExitSuccess, res.Summary())
		}
		mustContain(t, res.Summary(), "request:   GET https://127.0.0.1:", "body:      secure hello")
	})
}

func TestRunSendsTheRequestAsConfigured(t *testing.T) {
	type seen struct {
		method, path, query, body, host string
		header                          http.Header
		contentLength                   int64
	}
	cases := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, s seen)
	}{
		{
			name: "method, body and headers are sent in order with the default User-Agent",
			env: map[string]string{
				EnvMethod: "PUT", EnvBody: `{"replicas":3}`,
				"TASK_HTTP_HEADER_0_NAME": "Content-Type", "TASK_HTTP_HEADER_0_VALUE": "application/json",
				"TASK_HTTP_HEADER_1_NAME": "X-Multi", "TASK_HTTP_HEADER_1_VALUE": "one",
				"TASK_HTTP_HEADER_2_NAME": "x-multi", "TASK_HTTP_HEADER_2_VALUE": "two",
				"TASK_HTTP_HEADER_3_NAME": "X-Api-Key", "TASK_HTTP_HEADER_3_VALUE": "k-123", "TASK_HTTP_HEADER_3_SENSITIVE": "true",
			},
			check: func(t *testing.T, s seen) {
				if s.method != "PUT" || s.body != `{"replicas":3}` || s.contentLength != int64(len(`{"replicas":3}`)) {
					t.Errorf("method %q body %q length %d", s.method, s.body, s.contentLength)
				}
				if got := s.header.Get("Content-Type"); got != "application/json" {
					t.Errorf("Content-Type = %q", got)
				}
				if got := s.header.Values("X-Multi"); strings.Join(got, ",") != "one,two" {
					t.Errorf("X-Multi = %q, want one, two in order", got)
				}
				if got := s.header.Get("X-Api-Key"); got != "k-123" {
					t.Errorf("the sensitive header was not sent as is: %q", got)
				}
				if got := s.header.Get("User-Agent"); got != DefaultUserAgent {
					t.Errorf("User-Agent = %q, want %q", got, DefaultUserAgent)
				}
			},
		},
		{
			name: "a GET sends no body",
			env:  map[string]string{},
			check: func(t *testing.T, s seen) {
				if s.method != "GET" || s.body != "" || s.contentLength != 0 {
					t.Errorf("method %q body %q length %d", s.method, s.body, s.contentLength)
				}
			},
		},
		{
			name: "a User-Agent header replaces the default",
			env:  map[string]string{"TASK_HTTP_HEADER_0_NAME": "user-agent", "TASK_HTTP_HEADER_0_VALUE": "my-cron/2"},
			check: func(t *testing.T, s seen) {
				if got := s.header.Values("User-Agent"); len(got) != 1 || got[0] != "my-cron/2" {
					t.Errorf("User-Agent = %q, want only my-cron/2", got)
				}
			},
		},
		{
			name: "an empty User-Agent header sends none",
			env:  map[string]string{"TASK_HTTP_HEADER_0_NAME": "User-Agent"},
			check: func(t *testing.T, s seen) {
				if got, ok := s.header["User-Agent"]; ok {
					t.Errorf("User-Agent = %q, want none", got)
				}
			},
		},
		{
			name: "a Host header sets the request's host",
			env:  map[string]string{"TASK_HTTP_HEADER_0_NAME": "Host", "TASK_HTTP_HEADER_0_VALUE": "virtual.example"},
			check: func(t *testing.T, s seen) {
				if s.host != "virtual.example" {
					t.Errorf("Host = %q", s.host)
				}
			},
		},
		{
			name: "the path and query are sent exactly as written",
			env:  map[string]string{EnvURL: "/a%2Fb/c?x=1&y=%20&x=2"},
			check: func(t *testing.T, s seen) {
				if s.path != "/a%2Fb/c" || s.query != "x=1&y=%20&x=2" {
					t.Errorf("path %q query %q", s.path, s.query)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu   sync.Mutex
				got  []seen
				errs []error
			)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				got = append(got, seen{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery, body: string(body),
					host: r.Host, header: r.Header.Clone(), contentLength: r.ContentLength})
			}))
			env := map[string]string{EnvURL: srv.URL + "/"}
			for k, v := range tc.env {
				if k == EnvURL {
					v = srv.URL + v
				}
				env[k] = v
			}
			out := run(t, env)
			if out.code != ExitSuccess {
				t.Fatalf("exit code = %d, want 0", out.code)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || len(errs) > 0 {
				t.Fatalf("the server saw %d requests (errors %v), want 1", len(got), errs)
			}
			tc.check(t, got[0])
		})
	}
}

func TestSecretsNeverAppearInTheOutput(t *testing.T) {
	// The secret has characters that JSON, URL and path escaping change, so
	// an echo in any of those shapes is caught; its distinctive beginning
	// lets the test look for leaked fragments.
	const secret = `zq7-S3cr3t <&> "v"/+tail`
	const bearer = "Bearer eyJhbGciOi.zq7-second-token"
	jsonForm, _ := json.Marshal(secret)
	forms := []string{secret, string(jsonForm[1 : len(jsonForm)-1]), url.QueryEscape(secret), url.PathEscape(secret),
		strings.TrimPrefix(bearer, "Bearer "), "eyJhbGciOi"}
	for k := 5; k < len(secret); k++ {
		forms = append(forms, secret[:k])
	}

	echoJSON := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"error": "denied", "headers": r.Header})
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		url     string // path and query appended to the server URL
		want    string
	}{
		{"a body echoing the headers as JSON", echoJSON, "/", "denied"},
		{"a body echoing the headers verbatim", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "you sent ")
			r.Header.Write(w)
		}, "/", "you sent"},
		{"a body echoing the header query-escaped", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "retry at /login?key="+url.QueryEscape(r.Header.Get("X-Api-Key")), http.StatusBadRequest)
		}, "/", "retry at /login?key=***"},
		{"a secret straddling the end of the excerpt", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			// The excerpt ends with "zq7-S3": too short a piece to match
			// the secret or one of its words.
			io.WriteString(w, strings.Repeat(".", MaxExcerptBytes-6)+r.Header.Get("X-Api-Key")+strings.Repeat(".", 2000))
		}, "/", "(truncated; "},
		{"a secret in the status line", hijack(t, "HTTP/1.1 401 bad key "+secret+"\r\nContent-Length: 0\r\n\r\n"), "/", "401 bad key ***"},
		{"a secret in a malformed response quoted by the error", hijack(t, "garbage "+secret+"\r\n\r\n"), "/", "request failed (exit 7)"},
		// Without the sensitive headers (an Authorization header would
		// replace the URL's credentials), so only the password is masked.
		{"a secret sent as the URL password", func(w http.ResponseWriter, r *http.Request) {
			_, pw, _ := r.BasicAuth()
			http.Error(w, "bad password "+pw, http.StatusUnauthorized)
		}, "", "bad password ***"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is masked", func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.handler)
			env := map[string]string{
				EnvURL:                    srv.URL + tc.url,
				"TASK_HTTP_HEADER_0_NAME": "X-Api-Key", "TASK_HTTP_HEADER_0_VALUE": secret, "TASK_HTTP_HEADER_0_SENSITIVE": "true",
				"TASK_HTTP_HEADER_1_NAME": "Authorization", "TASK_HTTP_HEADER_1_VALUE": bearer, "TASK_HTTP_HEADER_1_SENSITIVE": "true",
			}
			if tc.url == "" {
				u, _ := url.Parse(srv.URL + "/")
				u.User = url.UserPassword("user", secret)
				env = map[string]string{EnvURL: u.String()}
			}
			out := run(t, env)
			if out.code == ExitSuccess || out.code == ExitBadDefinition {
				t.Errorf("exit code = %d, want a failure of the request", out.code)
			}
			mustContain(t, out.stdout, tc.want)
			mustNotContain(t, out.stdout, forms...)
			mustNotContain(t, out.termination, forms...)
		})
	}
}

func TestRunHidesURLCredentialsAndQueryValues(t *testing.T) {
	var gotUser, gotPass, gotToken string
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		gotToken = r.URL.Query().Get("token")
		// An error page that quotes the query string back.
		http.Error(w, "unknown page for query "+r.URL.RawQuery, http.StatusNotFound)
	}))
	target := strings.Replace(srv.URL, "http://", "http://robot:pa55-w0rd@", 1) + "/api?token=t0k3n-abcdef&page=2&flag"
	out := run(t, map[string]string{EnvURL: target})

	if gotUser != "robot" || gotPass != "pa55-w0rd" || gotToken != "t0k3n-abcdef" {
		t.Errorf("the server got user %q password %q token %q: the URL was not sent as written", gotUser, gotPass, gotToken)
	}
	mustContain(t, out.stdout, "request:   GET "+srv.URL+"/api?token=***&page=***&flag", "unknown page for query token=***&page=2&flag")
	mustNotContain(t, out.stdout, "robot", "pa55-w0rd", "t0k3n-abcdef")
}

func TestRedirects(t *testing.T) {
	var lastKey atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d?sig=redirect-signature", n-1), http.StatusFound)
			return
		}
		lastKey.Store(r.Header.Get("X-Api-Key"))
		io.WriteString(w, "arrived")
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
	})
	srv := newServer(t, mux)

	var otherMu sync.Mutex
	var otherHeader http.Header
	other := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherMu.Lock()
		otherHeader = r.Header.Clone()
		otherMu.Unlock()
		io.WriteString(w, "other host")
	}))
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
	})

	sensitive := map[string]string{
		"TASK_HTTP_HEADER_0_NAME": "X-Api-Key", "TASK_HTTP_HEADER_0_VALUE": "key-value-1", "TASK_HTTP_HEADER_0_SENSITIVE": "true",
		"TASK_HTTP_HEADER_1_NAME": "X-Plain", "TASK_HTTP_HEADER_1_VALUE": "plain-value",
	}
	withURL := func(u string) map[string]string {
		env := map[string]string{EnvURL: u}
		for k, v := range sensitive {
			env[k] = v
		}
		return env
	}

	t.Run("five redirects are followed, with the sensitive headers on the same host", func(t *testing.T) {
		out := run(t, withURL(srv.URL+"/hop/5"))
		if out.code != ExitSuccess {
			t.Fatalf("exit code = %d, want 0", out.code)
		}
		mustContain(t, out.stdout, "redirects: 5 followed, ending at "+srv.URL+"/hop/0?sig=***", "body:      arrived")
		if got, _ := lastKey.Load().(string); got != "key-value-1" {
			t.Errorf("the last hop got X-Api-Key %q, want it forwarded on the same host", got)
		}
	})
	t.Run("a sixth redirect fails with exit 6", func(t *testing.T) {
		out := run(t, withURL(srv.URL+"/hop/6"))
		if out.code != ExitTooManyRedirects {
			t.Fatalf("exit code = %d, want %d", out.code, ExitTooManyRedirects)
		}
		mustContain(t, out.stdout, "too many redirects (exit 6)", "status:    302 Found", "stopped after 5 redirects")
	})
	t.Run("a redirect loop fails with exit 6", func(t *testing.T) {
		out := run(t, withURL(srv.URL+"/loop"))
		if out.code != ExitTooManyRedirects {
			t.Fatalf("exit code = %d, want %d", out.code, ExitTooManyRedirects)
		}
	})
	t.Run("a redirect to another host drops the sensitive headers only", func(t *testing.T) {
		out := run(t, withURL(srv.URL+"/away"))
		if out.code != ExitSuccess {
			t.Fatalf("exit code = %d, want 0", out.code)
		}
		otherMu.Lock()
		defer otherMu.Unlock()
		if otherHeader.Get("X-Api-Key") != "" || otherHeader.Get("X-Plain") != "plain-value" {
			t.Errorf("the other host got X-Api-Key %q and X-Plain %q", otherHeader.Get("X-Api-Key"), otherHeader.Get("X-Plain"))
		}
		mustContain(t, out.stdout, "note:      sensitive headers were not forwarded to "+other.URL)
	})
}

func TestAHugeBodyIsNotReadWhole(t *testing.T) {
	const size = 50 << 20
	cases := []struct {
		name          string
		contentLength bool
		want          string
	}{
		{"a 50 MiB body of known length", true, "(truncated; the body is 52428800 bytes)"},
		{"a 50 MiB chunked body", false, "(truncated; only the first 512 bytes were read)"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is cut after the excerpt", func(t *testing.T) {
			t.Parallel()
			var written atomic.Int64
			handlerDone := make(chan struct{})
			done := testDone(t)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(handlerDone)
				if tc.contentLength {
					w.Header().Set("Content-Length", strconv.Itoa(size))
				}
				w.WriteHeader(http.StatusInternalServerError)
				chunk := []byte(strings.Repeat("0123456789abcdef", 2048))
				for written.Load() < size {
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return // the runner closed the connection
					}
					select {
					case <-done:
						return
					default:
					}
				}
			}))
			start := time.Now()
			out := run(t, map[string]string{EnvURL: srv.URL})
			if out.code != ExitUnexpectedStatus {
				t.Errorf("exit code = %d, want %d", out.code, ExitUnexpectedStatus)
			}
			mustContain(t, out.stdout, "body:      0123456789abcdef", tc.want)
			select {
			case <-handlerDone:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler is still writing 10 s after the runner finished: the body is being drained")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			t.Logf("the server wrote %d bytes before the runner hung up", written.Load())
			if n := written.Load(); n >= size {
				t.Errorf("the server could write the whole body (%d bytes): the runner read it all", n)
			}
		})
	}
}

func TestTheTerminationMessage(t *testing.T) {
	t.Run("fits in 1 KiB for the longest URL and an unprintable body", func(t *testing.T) {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(strings.Repeat("\x00\xff", 2000)))
		}))
		out := run(t, map[string]string{EnvURL: srv.URL + "/" + strings.Repeat("p", 1900) + "?q=" + strings.Repeat("v", 100)})
		if out.code != ExitUnexpectedStatus {
			t.Errorf("exit code = %d, want %d", out.code, ExitUnexpectedStatus)
		}
		// run checks the size and that the file matches stdout.
		mustContain(t, out.termination, "502 Bad Gateway", `body:      \x00\xff`)
	})
	t.Run("an unwritable path changes nothing else", func(t *testing.T) {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		var stdout strings.Builder
		env := map[string]string{EnvURL: srv.URL, EnvTerminationLog: filepath.Join(t.TempDir(), "missing-dir", "log")}
		if code := Run(context.Background(), envOf(env), &stdout); code != ExitSuccess {
			t.Errorf("exit code = %d, want 0", code)
		}
		mustContain(t, stdout.String(), "success (exit 0)")
	})
	t.Run("defaults to the kubelet's path", func(t *testing.T) {
		if got := TerminationLogPath(envOf(nil)); got != "/dev/termination-log" {
			t.Errorf("TerminationLogPath = %q", got)
		}
	})
}

func TestDoStopsWhenTheRunnerIsInterrupted(t *testing.T) {
	arrived := make(chan struct{})
	done := testDone(t)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		hang(done)(w, r)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel() // what SIGTERM does in main
	}()
	res := Do(ctx, nil, mustParse(t, map[string]string{EnvURL: srv.URL}))
	if res.ExitCode != ExitInterrupted {
		t.Errorf("exit code = %d, want %d; %s", res.ExitCode, ExitInterrupted, res.Summary())
	}
	mustContain(t, res.Summary(), "interrupted (exit 8)")
}

func mustParse(t *testing.T, env map[string]string) Request {
	t.Helper()
	req, err := ParseEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestRetryAfterOnA429OrA503IsReportedAsStructuredData(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header string
		want   int64
	}{
		{"a 503 with Retry-After seconds", http.StatusServiceUnavailable, "3", 3},
		{"a 429 with Retry-After seconds", http.StatusTooManyRequests, "120", 120},
		{"a 429 with an HTTP-date a minute ahead", http.StatusTooManyRequests, time.Now().Add(60 * time.Second).UTC().Format(http.TimeFormat), 60},
		{"a 503 without Retry-After", http.StatusServiceUnavailable, "", 0},
		{"a 500 with Retry-After is not a throttle", http.StatusInternalServerError, "30", 0},
		{"a garbled Retry-After is ignored", http.StatusServiceUnavailable, "soon", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
			}))
			out := run(t, map[string]string{EnvURL: srv.URL})
			// An HTTP-date has whole seconds, and the runner counts from
			// its own now: one second either way.
			got := out.data.RetryAfterSeconds
			if got < tc.want-1 || got > tc.want+1 || (tc.want == 0) != (got == 0) {
				t.Errorf("retryAfterSeconds = %d, want %d (±1)", got, tc.want)
			}
			if (tc.want > 0) != strings.Contains(out.termination, ResultDataPrefix) {
				t.Errorf("termination message:\n%s", out.termination)
			}
		})
	}
}

func TestParseResultDataReadsOnlyItsOwnLine(t *testing.T) {
	msg := "result:    unexpected status (exit 1)\nstatus:    503\n" + ResultDataPrefix + `{"retryAfterSeconds":7}` + "\n"
	rest, data, ok := ParseResultData(msg)
	if !ok || data.RetryAfterSeconds != 7 || rest != "result:    unexpected status (exit 1)\nstatus:    503\n" {
		t.Errorf("ParseResultData = %q, %+v, %v", rest, data, ok)
	}
	for _, s := range []string{"plain text from a shell script\n", "", ResultDataPrefix + "{not json}\n", "x\n" + ResultDataPrefix + "\n"} {
		if rest, _, ok := ParseResultData(s); ok || rest != s {
			t.Errorf("ParseResultData(%q) = %q, %v; want it left alone", s, rest, ok)
		}
	}
}
