package httprunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const (
	// MaxRedirects is how many redirects are followed; the next one fails
	// with ExitTooManyRedirects. Small, because a Task calls an endpoint, not
	// a web page; a longer chain is almost always a loop or a login page.
	MaxRedirects = 5
	// MaxExcerptBytes is how much of the response body is read: enough to
	// show an error message, and the runner never reads (or drains) more,
	// whatever the size of the body.
	MaxExcerptBytes = 512
)

// errTooManyRedirects is returned by the redirect policy; Do recognises it
// through the url.Error the client wraps it in.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

// NewClient is the client the runner uses in production: Go's default
// transport (proxy settings from HTTP_PROXY/HTTPS_PROXY/NO_PROXY, HTTP/2,
// system CA certificates). TLS is always verified: there is deliberately no
// option to skip verification. Do sets the redirect policy and the timeout
// itself, so tests can pass any client (e.g. httptest's, which trusts the
// test CA).
func NewClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// Result is what happened. Every string in it is already redacted (Mask in
// place of secrets and query values), and Summary redacts once more.
type Result struct {
	ExitCode int
	Method   string
	// URL is the requested URL in its display form (see DisplayURL).
	URL string
	// Redirects is how many redirects were followed; FinalURL is where they
	// led (display form), set when Redirects > 0.
	Redirects int
	FinalURL  string
	// StatusCode is 0 when no response arrived; Status is the status line
	// without the protocol, e.g. "404 Not Found".
	StatusCode int
	Status     string
	// Expected describes the success codes, e.g. "any 2xx".
	Expected string
	// ContentLength is the announced body size, -1 when unknown.
	ContentLength int64
	// Body is the beginning of the response body, at most MaxExcerptBytes;
	// BodyTruncated says the body went on (or a secret's beginning was cut
	// off its end).
	Body          []byte
	BodyTruncated bool
	// Latency is the time from sending the request to having read the
	// excerpt (or failing).
	Latency time.Duration
	// Err says why the request failed; empty when a response was judged on
	// its status alone.
	Err string
	// RetryAfter is the server's Retry-After on a 429 or 503 (0: none).
	RetryAfter time.Duration
	// Notes are extra facts worth knowing, e.g. headers not forwarded on a
	// redirect, or a result that could not be taken.
	Notes []string
	// Results are what the run hands back (Request.Results), also of a
	// failed request that got a response.
	Results map[string]string

	redact *redactor
}

// minMaskedQueryValue is the length from which a query value is masked
// wherever it appears (a server echoing the query in an error page), not
// only in the printed URL. Tokens are long; short values such as page=2 are
// not secrets, and masking every "2" would garble the body excerpt.
const minMaskedQueryValue = 8

// fromSecrets are the values that come from a Secret: Secret-backed header
// values and a Secret-backed URL. Results are masked against these only:
// what else secrets() masks (the URL's password and token-like query
// values) is in the Task's spec, which whoever reads the results can read
// too, and a run's own param in the query would otherwise garble them.
func (r Request) fromSecrets() []string {
	var s []string
	for _, h := range r.Headers {
		if h.Sensitive {
			s = append(s, h.Value)
		}
	}
	if r.SensitiveURL && r.URL != nil {
		s = append(s, r.RawURL)
		if len(r.URL.Path) > 1 {
			s = append(s, r.URL.Path, strings.TrimPrefix(r.URL.Path, "/"))
		}
		if r.URL.RawQuery != "" {
			s = append(s, r.URL.RawQuery)
		}
	}
	return s
}

// secrets are the values to mask everywhere: Secret-backed header values,
// the URL's password and its token-like query values.
func (r Request) secrets() []string {
	var s []string
	for _, h := range r.Headers {
		if h.Sensitive {
			s = append(s, h.Value)
		}
	}
	if r.URL == nil {
		return s
	}
	if r.SensitiveURL {
		s = append(s, r.RawURL)
		if len(r.URL.Path) > 1 {
			s = append(s, r.URL.Path, strings.TrimPrefix(r.URL.Path, "/"))
		}
		if r.URL.RawQuery != "" {
			s = append(s, r.URL.RawQuery)
		}
	}
	if r.URL.User != nil {
		if p, ok := r.URL.User.Password(); ok {
			s = append(s, p)
		}
	}
	for _, kv := range strings.Split(r.URL.RawQuery, "&") {
		_, raw, _ := strings.Cut(kv, "=")
		if len(raw) < minMaskedQueryValue {
			continue
		}
		s = append(s, raw)
		if v, err := url.QueryUnescape(raw); err == nil {
			s = append(s, v)
		}
	}
	return s
}

// Do makes the request once and reports the outcome; it never returns
// without a Result. client may be nil (NewClient is used). The timeout
// covers the whole exchange including reading the body excerpt; ctx
// cancellation (the pod being stopped) ends it early with ExitInterrupted.
func Do(ctx context.Context, client *http.Client, req Request) Result {
	red := newRedactor(req.secrets())
	res := Result{
		Method:        req.Method,
		URL:           req.displayURL(),
		Expected:      req.successDescription(),
		ContentLength: -1,
		redact:        red,
	}
	fail := func(code int, msg string) Result {
		res.ExitCode = code
		res.Err = red.String(msg)
		return res
	}

	if client == nil {
		client = NewClient()
		// One request per process: nothing to keep idle connections for.
		defer client.CloseIdleConnections()
	}
	c := *client // a copy, so the redirect policy does not leak into the caller's client
	c.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		// via holds the requests made so far: len(via) is the number of
		// the redirect about to be followed.
		if len(via) > MaxRedirects {
			return errTooManyRedirects
		}
		res.Redirects = len(via)
		if !sameOrigin(req.URL, next.URL) && stripSensitive(next.Header, req.Headers) {
			res.Notes = appendOnce(res.Notes, "sensitive headers were not forwarded to "+
				DisplayURL(&url.URL{Scheme: next.URL.Scheme, Host: next.URL.Host})+" after a redirect to another host")
		}
		return nil
	}

	reqCtx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	hreq, err := req.httpRequest(reqCtx)
	if err != nil {
		// ParseEnv validated everything NewRequest checks, so this is a
		// definition the validation missed; still not worth retrying.
		return fail(ExitBadDefinition, "cannot build the request: "+unwrapURLError(err).Error())
	}

	start := time.Now()
	resp, err := c.Do(hreq)
	if err != nil {
		res.Latency = time.Since(start)
		if resp != nil {
			// The redirect policy refused to go on: resp is the last
			// redirect response (its body already closed by the client).
			res.setResponse(resp)
		}
		code, msg := classify(ctx, reqCtx, err, req.Timeout)
		return fail(code, msg)
	}
	defer resp.Body.Close() // closing early aborts the rest of a big body: nothing is drained
	res.setResponse(resp)
	if res.Redirects > 0 && resp.Request != nil && !req.SensitiveURL {
		res.FinalURL = DisplayURL(resp.Request.URL)
	}

	var body, all []byte
	var readErr error
	if req.Method != http.MethodHead {
		body, all, res.BodyTruncated, readErr = req.readBody(resp.Body, resp.ContentLength)
	}
	res.Latency = time.Since(start)
	if len(body) > 0 {
		res.Body = red.Excerpt(body, res.BodyTruncated)
	}
	var notes []string
	res.Results, notes = takeResults(req.Results, resp, all, req.needsBody() && (all == nil || readErr != nil), newRedactor(req.fromSecrets()))
	for i, n := range notes {
		notes[i] = red.String(n)
	}
	res.Notes = append(res.Notes, notes...)

	switch {
	case !req.isSuccess(resp.StatusCode):
		// The status alone decides: a failing body read after an unexpected
		// status adds nothing the user must act on first.
		res.ExitCode = unexpectedStatusExit(resp.StatusCode)
		res.RetryAfter = retryAfter(resp, time.Now())
		return res
	case readErr != nil:
		// A success status whose body does not arrive in time (or is cut
		// off) is not a completed request: timeoutSeconds covers the body.
		code, msg := classify(ctx, reqCtx, readErr, req.Timeout)
		return fail(code, "reading the response body: "+msg)
	default:
		res.ExitCode = ExitSuccess
		return res
	}
}

func (res *Result) setResponse(resp *http.Response) {
	res.StatusCode = resp.StatusCode
	res.Status = resp.Status
	if res.Status == "" {
		res.Status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	res.ContentLength = resp.ContentLength
}

// httpRequest builds the request. The raw URL is sent as given (not
// re-serialised from the parsed form) so the server sees exactly what the
// user wrote; userinfo becomes Basic auth as usual in Go.
func (r Request) httpRequest(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if r.Body != "" {
		// A strings.Reader also gives the request a GetBody, so 307/308
		// redirects can resend the body.
		body = strings.NewReader(r.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, r.Method, r.RawURL, body)
	if err != nil {
		return nil, err
	}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, "Host") {
			// Go sends Request.Host, not a Host header.
			hreq.Host = h.Value
			continue
		}
		hreq.Header.Add(h.Name, h.Value)
	}
	// Identify the runner unless the user chose a User-Agent (an empty one
	// included, which makes Go send none).
	if _, ok := hreq.Header["User-Agent"]; !ok {
		hreq.Header.Set("User-Agent", DefaultUserAgent)
	}
	return hreq, nil
}

// readExcerpt reads at most MaxExcerptBytes of the body (one byte more when
// the length is unknown, to tell whether it goes on). truncated means the
// body is longer than what was read.
func readExcerpt(body io.Reader, contentLength int64) (excerpt []byte, truncated bool, err error) {
	want := MaxExcerptBytes + 1
	switch {
	case contentLength > MaxExcerptBytes:
		want, truncated = MaxExcerptBytes, true
	case contentLength >= 0:
		want = int(contentLength)
	}
	buf := make([]byte, want)
	n := 0
	for n < want {
		m, err := body.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf[:n], truncated, err
		}
	}
	if n > MaxExcerptBytes {
		n, truncated = MaxExcerptBytes, true
	}
	return buf[:n], truncated, nil
}

// sameOrigin reports whether a redirect stays on the scheme and host:port of
// the original URL; only then do sensitive headers follow it. Go itself only
// strips Authorization and Cookie across domains, but a Secret-backed header
// such as X-Api-Key is just as much a credential, and a downgrade to http
// would send it in clear text.
func sameOrigin(a, b *url.URL) bool {
	return a != nil && b != nil && strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// stripSensitive deletes the sensitive headers from h and reports whether it
// deleted any.
func stripSensitive(h http.Header, headers []Header) bool {
	stripped := false
	for _, hd := range headers {
		if !hd.Sensitive {
			continue
		}
		name := http.CanonicalHeaderKey(hd.Name)
		if _, ok := h[name]; ok {
			delete(h, name)
			stripped = true
		}
	}
	return stripped
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// unwrapURLError drops the url.Error wrapper: its text repeats the full URL,
// query values included.
func unwrapURLError(err error) error {
	for {
		var ue *url.Error
		if !errors.As(err, &ue) || ue.Err == nil {
			return err
		}
		err = ue.Err
	}
}
