package httprunner

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Environment variables: the contract with the operator, which fills them
// from spec.url and spec.http. Header variables are numbered densely from 0;
// see HeaderNameEnv and friends.
const (
	EnvURL            = "TASK_HTTP_URL"
	EnvMethod         = "TASK_HTTP_METHOD"
	EnvBody           = "TASK_HTTP_BODY"
	EnvSuccessCodes   = "TASK_HTTP_SUCCESS_CODES"
	EnvTimeoutSeconds = "TASK_HTTP_TIMEOUT_SECONDS"

	// EnvTerminationLog overrides where the summary is written for the
	// kubelet (tests, or running the runner by hand).
	EnvTerminationLog = "TASK_RUNNER_TERMINATION_LOG"
	// DefaultTerminationLog is the container's default
	// terminationMessagePath.
	DefaultTerminationLog = "/dev/termination-log"
)

// HeaderNameEnv is the variable holding the name of header i.
func HeaderNameEnv(i int) string { return fmt.Sprintf("TASK_HTTP_HEADER_%d_NAME", i) }

// HeaderValueEnv is the variable holding the value of header i.
func HeaderValueEnv(i int) string { return fmt.Sprintf("TASK_HTTP_HEADER_%d_VALUE", i) }

// HeaderSensitiveEnv is the variable that is "true" when header i comes from
// a Secret and must never be printed.
func HeaderSensitiveEnv(i int) string { return fmt.Sprintf("TASK_HTTP_HEADER_%d_SENSITIVE", i) }

// Defaults and bounds, matching the CRD (spec.http) so that running the
// runner by hand behaves like a Task.
const (
	DefaultMethod         = http.MethodGet
	DefaultTimeoutSeconds = 30
	MaxTimeoutSeconds     = 3600
	DefaultUserAgent      = "task-operator-runner/1"

	// maxHeaders stops the header scan even if getenv answers for every
	// index (a broken fake, a hostile environment); the CRD allows 32.
	maxHeaders = 256
)

// allowedMethods is the CRD's enum. CONNECT and TRACE are left out on
// purpose: they are not "call an endpoint" requests. Methods are
// case-sensitive, so "get" is refused rather than silently sent.
var allowedMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// Request is the parsed, validated request definition.
type Request struct {
	// RawURL is TASK_HTTP_URL as given, sent as is; URL is its parsed form,
	// used for display and redirect decisions.
	RawURL string
	URL    *url.URL
	Method string
	// Body is sent when non-empty (with a Content-Length).
	Body    string
	Headers []Header
	// SuccessCodes are the status codes counted as success; empty means
	// any 2xx.
	SuccessCodes []int
	// Timeout bounds the whole exchange: connecting, redirects, response
	// headers and reading the body excerpt.
	Timeout time.Duration
	// SensitiveURL: the URL came from a Secret (a Slack webhook URL is a
	// credential), so only its scheme and host are ever printed.
	SensitiveURL bool
	// Results are what the run hands back from the response
	// (spec.http.results).
	Results []ResultSpec
}

// Header is one request header, in the order given.
type Header struct {
	Name  string
	Value string
	// Sensitive values come from a Secret: they are replaced by *** in
	// everything the runner prints and not forwarded to another host on a
	// redirect.
	Sensitive bool
}

// DefinitionError says the request cannot be made as defined. It maps to
// ExitBadDefinition, which the operator does not retry. Its messages never
// contain header values (they may be secrets).
type DefinitionError struct {
	// Problems lists every problem found, so one failed attempt tells the
	// user everything to fix.
	Problems []string
}

func (e *DefinitionError) Error() string {
	return strings.Join(e.Problems, "; ")
}

// ParseEnv reads and validates the request definition. It is pure: getenv is
// os.Getenv in production and a map lookup in tests. An unset variable and an
// empty one mean the same (that is all getenv can tell). On error the
// returned error is a *DefinitionError listing every problem.
func ParseEnv(getenv func(string) string) (Request, error) {
	var problems []string
	addf := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	req := Request{
		RawURL:  getenv(EnvURL),
		Method:  getenv(EnvMethod),
		Body:    getenv(EnvBody),
		Timeout: DefaultTimeoutSeconds * time.Second,
	}

	if u, msg := parseURL(req.RawURL); msg != "" {
		addf("%s %s", EnvURL, msg)
	} else {
		req.URL = u
	}

	if req.Method == "" {
		req.Method = DefaultMethod
	} else if !slices.Contains(allowedMethods, req.Method) {
		addf("%s %s is not one of %s", EnvMethod, quoteShort(req.Method), strings.Join(allowedMethods, ", "))
	}

	if s := strings.TrimSpace(getenv(EnvTimeoutSeconds)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxTimeoutSeconds {
			addf("%s %s is not a whole number of seconds between 1 and %d", EnvTimeoutSeconds, quoteShort(s), MaxTimeoutSeconds)
		} else {
			req.Timeout = time.Duration(n) * time.Second
		}
	}

	if s := strings.TrimSpace(getenv(EnvSuccessCodes)); s != "" {
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			n, err := strconv.Atoi(part)
			if err != nil || n < 100 || n > 599 {
				addf("%s entry %s is not a status code between 100 and 599 (want a comma separated list such as \"200,204\")", EnvSuccessCodes, quoteShort(part))
				continue
			}
			if !slices.Contains(req.SuccessCodes, n) {
				req.SuccessCodes = append(req.SuccessCodes, n)
			}
		}
	}

	req.Headers, problems = parseHeaders(getenv, problems)
	req.Results, problems = parseResults(getenv, problems)

	if len(problems) > 0 {
		return Request{}, &DefinitionError{Problems: problems}
	}
	return req, nil
}

// parseURL returns the parsed URL or a message (without the variable name)
// saying why it cannot be used.
func parseURL(raw string) (*url.URL, string) {
	if raw == "" {
		return nil, "is missing: the runner needs the URL to call"
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Use only the inner error: url.Error repeats the whole URL, whose
		// userinfo and query may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "is not a valid URL: " + err.Error()
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, "must be an absolute http:// or https:// URL (it has no scheme)"
	default:
		return nil, fmt.Sprintf("must be an http:// or https:// URL, not %s", quoteShort(u.Scheme+"://"))
	}
	if u.Hostname() == "" {
		return nil, "has no host"
	}
	return u, ""
}

func parseHeaders(getenv func(string) string, problems []string) ([]Header, []string) {
	var headers []Header
	for i := 0; ; i++ {
		name := getenv(HeaderNameEnv(i))
		if name == "" {
			// Dense numbering: the first missing name ends the list. A value
			// without its name is a numbering mistake worth reporting, not
			// a header to drop silently.
			if getenv(HeaderValueEnv(i)) != "" {
				problems = append(problems, fmt.Sprintf("%s is set but %s is missing", HeaderValueEnv(i), HeaderNameEnv(i)))
			}
			return headers, problems
		}
		if i >= maxHeaders {
			problems = append(problems, fmt.Sprintf("more than %d headers", maxHeaders))
			return headers, problems
		}
		h := Header{Name: name, Value: getenv(HeaderValueEnv(i))}
		if !validHeaderName(name) {
			problems = append(problems, fmt.Sprintf("%s %s is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", HeaderNameEnv(i), quoteShort(name)))
		}
		if s := getenv(HeaderSensitiveEnv(i)); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s %s is not true or false", HeaderSensitiveEnv(i), quoteShort(s)))
				b = true // keep treating it as a secret if anything is printed
			}
			h.Sensitive = b
		}
		if !validHeaderValue(h.Value) {
			// Never quote the value: it may be a secret.
			problems = append(problems, fmt.Sprintf("%s (header %s) contains a line break or another control character", HeaderValueEnv(i), quoteShort(name)))
		}
		headers = append(headers, h)
	}
}

// validHeaderName reports whether s is an RFC 9110 token, the same rule as
// the CRD's pattern.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters other than tab (RFC 9110
// field-value). Checking here turns a would-be header injection or a
// transport error into a clear "bad definition".
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// quoteShort quotes user input for a message, cut so that one absurd value
// cannot crowd out the rest of the 1 KiB summary.
func quoteShort(s string) string {
	const maxQuoted = 48
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// successDescription describes the success codes for the summary.
func (r Request) successDescription() string {
	if len(r.SuccessCodes) == 0 {
		return "any 2xx"
	}
	s := make([]string, len(r.SuccessCodes))
	for i, c := range r.SuccessCodes {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ", ")
}

// isSuccess reports whether code counts as success.
func (r Request) isSuccess(code int) bool {
	if len(r.SuccessCodes) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(r.SuccessCodes, code)
}
