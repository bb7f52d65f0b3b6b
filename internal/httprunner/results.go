package httprunner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/taskops/task-operator/internal/results"
)

// A run's results (spec.http.results) come from the response: its status
// code, a header or a field of its JSON body (kubectl's JSONPath). They go
// into the termination message as internal/results' block, after the
// summary and the structured line.

// ResultNameEnv and ResultFromEnv hold result i's name and where it comes
// from (statusCode, header:<Name>, jsonPath:<expression>).
func ResultNameEnv(i int) string { return fmt.Sprintf("TASK_HTTP_RESULT_%d_NAME", i) }
func ResultFromEnv(i int) string { return fmt.Sprintf("TASK_HTTP_RESULT_%d_FROM", i) }

// MaxResultBodyBytes is how much of a response body a jsonPath result may
// read: the excerpt alone (MaxExcerptBytes) is too short for most APIs.
const MaxResultBodyBytes = 1 << 20

// maxResults stops the scan as maxHeaders does; the CRD allows 16.
const maxResults = 64

// ResultSpec is one result to take from the response.
type ResultSpec struct {
	Name string
	// Exactly one of these says where it is.
	StatusCode bool
	Header     string
	JSONPath   *jsonpath.JSONPath
	Expr       string // the JSONPath as written, for messages
}

// parseResults reads the result variables, densely numbered from 0.
func parseResults(getenv func(string) string, problems []string) ([]ResultSpec, []string) {
	var out []ResultSpec
	for i := 0; i < maxResults; i++ {
		name, from := getenv(ResultNameEnv(i)), getenv(ResultFromEnv(i))
		if name == "" && from == "" {
			break
		}
		r := ResultSpec{Name: name}
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("%s is empty", ResultNameEnv(i)))
			continue
		case from == "statusCode":
			r.StatusCode = true
		case strings.HasPrefix(from, "header:") && validHeaderName(strings.TrimPrefix(from, "header:")):
			r.Header = strings.TrimPrefix(from, "header:")
		case strings.HasPrefix(from, "jsonPath:"):
			r.Expr = strings.TrimPrefix(from, "jsonPath:")
			r.JSONPath = jsonpath.New(name).AllowMissingKeys(false)
			if err := r.JSONPath.Parse(r.Expr); err != nil {
				problems = append(problems, fmt.Sprintf("result %s: %s is not a JSONPath expression: %v", name, quoteShort(r.Expr), err))
				continue
			}
		default:
			problems = append(problems, fmt.Sprintf("result %s: %s %s is not statusCode, header:<Name> or jsonPath:<expression>", name, ResultFromEnv(i), quoteShort(from)))
			continue
		}
		out = append(out, r)
	}
	return out, problems
}

// needsBody reports whether a result reads the response body.
func (r Request) needsBody() bool {
	for _, res := range r.Results {
		if res.JSONPath != nil {
			return true
		}
	}
	return false
}

// readBody reads what the request needs of the body: the excerpt, or as
// much as MaxResultBodyBytes for JSONPath results. whole is the body for
// the results: nil when only the excerpt was wanted, or when the body is
// longer than MaxResultBodyBytes (errBodyTooLong then).
func (r Request) readBody(body io.Reader, contentLength int64) (excerpt, whole []byte, truncated bool, err error) {
	if !r.needsBody() {
		excerpt, truncated, err = readExcerpt(body, contentLength)
		return excerpt, nil, truncated, err
	}
	all, err := io.ReadAll(io.LimitReader(body, MaxResultBodyBytes+1))
	excerpt = all[:min(len(all), MaxExcerptBytes)]
	truncated = len(all) > MaxExcerptBytes
	if len(all) > MaxResultBodyBytes {
		return excerpt, nil, truncated, err
	}
	return excerpt, all, truncated, err
}

// takeResults takes each result from the response; one that cannot be
// taken is left out and said in a note (it does not fail the run).
func takeResults(specs []ResultSpec, resp *http.Response, body []byte, bodyUnread bool, red *redactor) (map[string]string, []string) {
	if len(specs) == 0 || resp == nil {
		return nil, nil
	}
	values := map[string]string{}
	var notes []string
	var doc any
	var docErr error
	parsed := false
	for _, s := range specs {
		switch {
		case s.StatusCode:
			values[s.Name] = strconv.Itoa(resp.StatusCode)
		case s.Header != "":
			v, ok := resp.Header[http.CanonicalHeaderKey(s.Header)]
			if !ok || len(v) == 0 {
				notes = append(notes, fmt.Sprintf("result %s: the response has no %s header", s.Name, s.Header))
				continue
			}
			values[s.Name] = red.String(v[0])
		default:
			if !parsed {
				parsed = true
				switch {
				case bodyUnread:
					docErr = fmt.Errorf("the body could not be read whole (over %d bytes, or cut off)", MaxResultBodyBytes)
				default:
					docErr = json.Unmarshal(body, &doc)
				}
			}
			if docErr != nil {
				notes = append(notes, fmt.Sprintf("result %s: the body is not JSON (%v)", s.Name, docErr))
				continue
			}
			var buf bytes.Buffer
			if err := s.JSONPath.Execute(&buf, doc); err != nil {
				notes = append(notes, fmt.Sprintf("result %s: %s: %v", s.Name, s.Expr, err))
				continue
			}
			values[s.Name] = red.String(buf.String())
		}
	}
	if len(values) == 0 {
		values = nil
	}
	return values, notes
}

// resultsBlock is the results as the termination message's last block.
func resultsBlock(values map[string]string) string {
	return results.Append("", values, nil)
}
