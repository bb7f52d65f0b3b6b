// Package params decides a run's values (spec.params) and how they reach
// the pod. It is pure: the plan resolves a run-now run's values with
// Resolve when it consumes the token, the Job builder turns them into
// environment variables (EnvName) and an http Task's request
// (Substitute), and every Job of the run records them (Encode, Decode), so
// retries and a restarted operator use the same values.
//
// The invariant: a run's values are decided once, when the run starts, from
// the one version of the Task that carried its token; they never change
// afterwards and are never interpreted by a shell.
package params

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// MaxValueBytes bounds one value, default or given; MaxRunBytes all of a
// run's values, names included: each run's history entry and attempt
// records keep them, and the status must stay small.
const (
	MaxValueBytes = 1024
	MaxRunBytes   = 4096
)

// EnvPrefix starts every param's environment variable.
const EnvPrefix = "TASK_PARAM_"

// EnvName is the environment variable that carries a param.
func EnvName(name string) string { return EnvPrefix + strings.ToUpper(name) }

// Defaults are the values of a run given none (run 0, cron slots); an
// error names the params without a default.
func Defaults(spec []v1alpha1.ParamSpec) (map[string]string, error) {
	return Resolve(spec, "")
}

// Resolve is a run's values: raw is the run-params annotation written with
// its token ("" when none), a JSON object of strings naming declared params;
// defaults fill what it does not give. The error says exactly what is
// wrong, for the run's InvalidParams message.
func Resolve(spec []v1alpha1.ParamSpec, raw string) (map[string]string, error) {
	given := map[string]string{}
	if strings.TrimSpace(raw) != "" {
		var any map[string]any
		if err := json.Unmarshal([]byte(raw), &any); err != nil {
			return nil, fmt.Errorf("%s is not a JSON object of strings: %v", v1alpha1.AnnotationRunParams, err)
		}
		for k, v := range any {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: the value of %q is not a string", v1alpha1.AnnotationRunParams, k)
			}
			given[k] = s
		}
	}
	return Values(spec, given)
}

// Values is a run's values from those given (by the run-params annotation,
// or the upstream results of spec.after[].params): given must name
// declared params, defaults fill the rest, and the error says what is
// missing or too large.
func Values(spec []v1alpha1.ParamSpec, given map[string]string) (map[string]string, error) {
	declared := map[string]bool{}
	for _, p := range spec {
		declared[p.Name] = true
	}
	var unknown []string
	for k := range given {
		if !declared[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("unknown params %s: spec.params declares %s", quoteAll(unknown), quoteAll(names(spec)))
	}
	out := map[string]string{}
	var missing []string
	for _, p := range spec {
		v, ok := given[p.Name]
		switch {
		case ok:
		case p.Default != nil:
			v = *p.Default
		default:
			missing = append(missing, p.Name)
			continue
		}
		if len(v) > MaxValueBytes {
			return nil, fmt.Errorf("the value of param %q is %d bytes, over the %d allowed", p.Name, len(v), MaxValueBytes)
		}
		out[p.Name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no value for required params %s (they have no default)", quoteAll(missing))
	}
	total := 0
	for k, v := range out {
		total += len(k) + len(v)
	}
	if total > MaxRunBytes {
		return nil, fmt.Errorf("the values are %d bytes in all (names included), over the %d allowed", total, MaxRunBytes)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func names(spec []v1alpha1.ParamSpec) []string {
	if len(spec) == 0 {
		return []string{}
	}
	out := make([]string, 0, len(spec))
	for _, p := range spec {
		out = append(out, p.Name)
	}
	return out
}

func quoteAll(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// Encode is values as the JSON a Job's annotation keeps; "" for none.
func Encode(values map[string]string) string {
	if len(values) == 0 {
		return ""
	}
	b, _ := json.Marshal(values) // map keys come out sorted
	return string(b)
}

// Decode reads Encode's form back; nil for "" or anything else.
func Decode(s string) map[string]string {
	if s == "" {
		return nil
	}
	var out map[string]string
	if json.Unmarshal([]byte(s), &out) != nil || len(out) == 0 {
		return nil
	}
	return out
}

// reference is $(params.<name>) in an http Task's url, body or header value.
var reference = regexp.MustCompile(`\$\(params\.([^)]*)\)`)

// Undeclared are the names $(params.<name>) references in text that spec
// does not declare (the schema cannot afford to check long texts).
func Undeclared(spec []v1alpha1.ParamSpec, text string) []string {
	declared := map[string]bool{}
	for _, p := range spec {
		declared[p.Name] = true
	}
	var out []string
	for _, m := range reference.FindAllStringSubmatch(text, -1) {
		if !declared[m[1]] && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// Substitute replaces each $(params.<name>) in text by encode(value); a
// name without a value is left as it is.
func Substitute(text string, values map[string]string, encode func(string) string) string {
	if len(values) == 0 || !strings.Contains(text, "$(params.") {
		return text
	}
	return reference.ReplaceAllStringFunc(text, func(m string) string {
		v, ok := values[reference.FindStringSubmatch(m)[1]]
		if !ok {
			return m
		}
		return encode(v)
	})
}

// Verbatim leaves a value as it is (http.body, header values).
func Verbatim(s string) string { return s }

// InURL percent-encodes a value for anywhere in a URL: every byte but the
// unreserved ones, so a value cannot end a path segment or add a query
// parameter.
func InURL(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
