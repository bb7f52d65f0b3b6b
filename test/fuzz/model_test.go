package fuzz_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/testutil"
)

// The model: what the contract (docs task-api.md, plus "what a Kubernetes
// user would expect" where it is silent) says about a spec built from an
// input, written independently of the CRD. The checks compare it with what
// the API server, the reconciler's schedule parser, the Job API and the
// http runner actually do.

// stage is where the contract lets a problem be caught at the latest.
type stage int

const (
	// atAdmission: the contract's own rules; the CRD must refuse.
	atAdmission stage = iota
	// atSchedule: refused at admission or reported as InvalidSchedule.
	atSchedule
	// atJob: what the Job API refuses; refused at admission or reported as
	// InvalidSpec when the Job is refused.
	atJob
	// atPod: what the API server refuses in the pod the Job controller
	// creates (pod-only rules); the attempt ends with StartTimeout.
	atPod
	// atRuntime: what the http runner refuses as a bad definition (exit 2,
	// NotRetryable).
	atRuntime
)

func (s stage) String() string {
	return [...]string{"admission", "schedule", "job", "pod", "runtime"}[s]
}

// problem is one thing wrong with a spec.
type problem struct {
	id    string // stable, e.g. "serviceAccountName/not-dns-subdomain"
	stage stage
	// cel: a CRD rule (OpenAPI schema or CEL) could refuse it at admission.
	cel bool
}

// verdict is the model's view of a spec.
type verdict struct {
	problems []problem
	// jobMaybe are field path prefixes of the Job the Job API may refuse
	// for reasons the model does not predict exactly (resource quantities,
	// well-known pod annotations): a refusal there is not a surprise.
	jobMaybe []string
	// sure is false when Extra changed the spec: the model only knows the
	// typed fields.
	sure bool
}

func (v verdict) valid() bool { return len(v.problems) == 0 }

func (v verdict) at(s stage) []problem {
	var out []problem
	for _, p := range v.problems {
		if p.stage == s {
			out = append(out, p)
		}
	}
	return out
}

var (
	headerNameRE = regexp.MustCompile(`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`)
	keyRE        = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	zoneRE       = regexp.MustCompile(`^[A-Za-z0-9_+\-/]+$`)
	fieldPathRE  = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.*)'\]$`)
)

var validFieldPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true,
	"metadata.labels": true, "metadata.annotations": true,
	"spec.nodeName": true, "spec.serviceAccountName": true,
	"status.hostIP": true, "status.hostIPs": true, "status.podIP": true, "status.podIPs": true,
}

var reservedKeyPrefixes = []string{"batch.taskops.io/", "batch.kubernetes.io/"}
var reservedKeys = map[string]bool{"job-name": true, "controller-uid": true, "app.kubernetes.io/managed-by": true}

func runes(s string) int { return utf8.RuneCountInString(s) }

// crdBounds are the bounds the contract leaves to the implementation ("every
// string and list bounded", numbers not given): the model reads them from
// the generated CRD, so it follows a deliberate change of a bound instead
// of calling it a refused valid spec. The contract's own numbers (shell
// 32 KiB, url 2 KiB, replicas 1..100, maxRetry 0..100, ...) are written in
// the model, so a CRD that drifts from them is caught. 0 means unbounded.
type crdBounds struct {
	envValue, envItems, headerValue, headerItems, body, image, annotationValue int
}

var crdLimits = sync.OnceValue(func() crdBounds {
	path := filepath.Join(testutil.RepoRoot(), "config", "crd", "bases", "batch.taskops.io_tasks.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		panic(err)
	}
	spec := dig(crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")
	num := func(keys ...any) int {
		n, _ := dig(spec, keys...).(float64)
		return int(n)
	}
	l := crdBounds{
		envValue:    num("env", "items", "properties", "value", "maxLength"),
		envItems:    num("env", "maxItems"),
		headerValue: num("http", "properties", "headers", "items", "properties", "value", "maxLength"),
		headerItems: num("http", "properties", "headers", "maxItems"),
		body:        num("http", "properties", "body", "maxLength"),
		image:       num("image", "maxLength"),
	}
	// Map values are bounded by a CEL rule: self.all(k, self[k].size() <= N).
	rules, _ := dig(spec, "podMetadata", "properties", "annotations", "x-kubernetes-validations").([]any)
	for _, r := range rules {
		rule, _ := dig(r, "rule").(string)
		if m := regexp.MustCompile(`self\[k\]\.size\(\) <= (\d+)`).FindStringSubmatch(rule); m != nil {
			l.annotationValue, _ = strconv.Atoi(m[1])
		}
	}
	return l
})

// dig walks YAML-shaped data by map keys and list indexes.
func dig(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// over reports whether s is longer than bound (0: unbounded).
func over(s string, bound int) bool { return bound > 0 && runes(s) > bound }

// model judges in (already normalized).
func model(in input) verdict {
	lim := crdLimits()
	v := verdict{sure: in.extra() == nil}
	add := func(id string, s stage, cel bool) {
		v.problems = append(v.problems, problem{id: id, stage: s, cel: cel})
	}
	adm := func(id string) { add(id, atAdmission, true) }
	rangeCheck := func(bit uint64, field string, val, lo, hi int64) {
		if in.has(bit) && (val < lo || val > hi) {
			adm(field + "/out-of-range")
		}
	}
	shell, http := in.Type == "shell", in.Type == "http"

	// Identity.
	if in.Name == "" || len(validation.IsDNS1123Label(in.Name)) > 0 {
		adm("metadata.name/not-dns-label")
	}
	if !shell && !http {
		adm("type/unknown")
	}

	// What runs.
	switch {
	case in.has(bShell) && !shell:
		adm("shell/forbidden")
	case !in.has(bShell) && shell:
		adm("shell/required")
	}
	if in.has(bShell) {
		if in.Shell == "" {
			adm("shell/empty")
		}
		if runes(in.Shell) > 32768 {
			adm("shell/too-long")
		}
	}
	switch {
	case in.has(bURL) && !http:
		adm("url/forbidden")
	case !in.has(bURL) && http:
		adm("url/required")
	}
	if in.has(bURL) {
		if runes(in.URL) > 2048 {
			adm("url/too-long")
		}
		if u, err := url.Parse(in.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			adm("url/not-absolute-http")
		}
	}
	if in.has(bHTTP) {
		if !http {
			adm("http/forbidden")
		}
		if in.has(bMethod) && !oneOf(in.Method, "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS") {
			adm("http.method/unknown")
		}
		if in.has(bBody) && over(in.Body, lim.body) {
			adm("http.body/too-long")
		}
		rangeCheck(bSuccessCodes, "http.successCodes", in.SuccessCode, 100, 599)
		rangeCheck(bTimeoutSeconds, "http.timeoutSeconds", in.TimeoutSeconds, 1, 3600)
		if in.hasHeaders() {
			if lim.headerItems > 0 && in.Count > int64(lim.headerItems) {
				adm("http.headers/too-many")
			}
			if in.has(bHeaderValue) == in.has(bHeaderSecret) && in.Count > 0 {
				adm("http.headers/value-xor-valueFrom")
			}
			for _, name := range in.headerNames() {
				if !headerNameRE.MatchString(name) || runes(name) > 256 {
					adm("http.headers.name/invalid")
					break
				}
			}
			if in.Count > 0 && in.has(bHeaderValue) {
				if over(in.HeaderValue, lim.headerValue) {
					adm("http.headers.value/too-long")
				}
				if hasControl(in.HeaderValue) && http {
					add("http.headers.value/control-character", atRuntime, true)
				}
			}
			if in.Count > 0 && in.has(bHeaderSecret) {
				keyRefProblems(in, "http.headers.valueFrom.secretKeyRef", add)
			}
		}
	}

	// Retries and timing.
	rangeCheck(bReplicas, "replicas", in.Replicas, 1, 100)
	rangeCheck(bMaxRetry, "maxRetry", in.MaxRetry, 0, 100)
	if in.has(bBackoff) {
		rangeCheck(bBackoffInitial, "backoff.initialSeconds", in.BackoffInitial, 0, 86400)
		rangeCheck(bBackoffMax, "backoff.maxSeconds", in.BackoffMax, 0, 86400)
		rangeCheck(bBackoffFactor, "backoff.factor", in.BackoffFactor, 1, 10)
		initial, maxS := int64(10), int64(300)
		if in.has(bBackoffInitial) {
			initial = in.BackoffInitial
		}
		if in.has(bBackoffMax) {
			maxS = in.BackoffMax
		}
		if maxS < initial {
			adm("backoff/max-below-initial")
		}
	}
	rangeCheck(bActiveDeadline, "activeDeadlineSeconds", in.ActiveDeadline, 1, 31536000)
	rangeCheck(bStartTimeout, "startTimeoutSeconds", in.StartTimeout, 1, 86400)
	rangeCheck(bStartingDeadline, "startingDeadlineSeconds", in.StartingDeadline, 0, 31536000)
	rangeCheck(bTTL, "ttlSecondsAfterFinished", in.TTL, 0, 31536000)
	rangeCheck(bHistoryOK, "successfulRunsHistoryLimit", in.HistoryOK, 0, 100)
	rangeCheck(bHistoryFailed, "failedRunsHistoryLimit", in.HistoryFailed, 0, 100)
	if in.has(bConcurrency) && !oneOf(in.Concurrency, "Forbid", "Allow", "Replace") {
		adm("concurrencyPolicy/unknown")
	}

	// Schedule.
	if in.has(bSchedule) {
		if in.has(bTTL) {
			adm("ttlSecondsAfterFinished/with-schedule")
		}
		if in.Schedule == "" || runes(in.Schedule) > 256 {
			adm("schedule/length")
		} else if _, err := scheduler.Parse(in.Schedule, ""); err != nil {
			id, cel := scheduleProblem(err.Error())
			add(id, atSchedule, cel)
		}
	} else {
		if in.has(bTimeZone) {
			adm("timeZone/without-schedule")
		}
		if in.has(bStartingDeadline) {
			adm("startingDeadlineSeconds/without-schedule")
		}
	}
	if in.has(bTimeZone) {
		switch {
		case in.TimeZone == "" || runes(in.TimeZone) > 64:
			adm("timeZone/length")
		case in.TimeZone == "Local":
			add("timeZone/Local", atSchedule, true)
		default:
			if _, err := scheduler.Parse("@hourly", in.TimeZone); err != nil {
				// Only a list of every zone name could refuse an unknown
				// one at admission; the pattern refuses what no zone has.
				add("timeZone/unknown", atSchedule, !zoneRE.MatchString(in.TimeZone))
			}
		}
	}

	// The pod.
	if in.has(bImage) {
		if !shell {
			adm("image/forbidden")
		}
		if in.Image == "" || over(in.Image, lim.image) {
			adm("image/length")
		}
		if !imageChars.MatchString(in.Image) {
			// Image references are made of these characters only (the CRD
			// refuses the rest: whitespace, control and non-ASCII runes).
			adm("image/not-a-reference")
		}
		if strings.TrimSpace(in.Image) != in.Image {
			// The pod API refuses it (templates are not checked).
			add("image/surrounding-whitespace", atPod, true)
		}
	}
	if in.has(bServiceAccount) {
		if in.ServiceAccount == "" {
			adm("serviceAccountName/empty")
		} else if len(validation.IsDNS1123Subdomain(in.ServiceAccount)) > 0 {
			add("serviceAccountName/not-dns-subdomain", atJob, true)
		}
	}
	if in.hasEnv() {
		envProblems(in, adm, add)
	}
	if in.has(bLabels) {
		k, val := in.LabelKey, in.LabelValue
		if reserved(k) {
			adm("podMetadata.labels/reserved-key")
		}
		if runes(k) > 317 || runes(val) > 63 {
			adm("podMetadata.labels/too-long")
		}
		if len(validation.IsQualifiedName(k)) > 0 {
			add("podMetadata.labels/invalid-key", atJob, true)
		}
		if len(validation.IsValidLabelValue(val)) > 0 {
			add("podMetadata.labels/invalid-value", atJob, true)
		}
	}
	if in.has(bAnnotations) {
		k, val := in.AnnotationKey, in.AnnotationValue
		if reserved(k) {
			adm("podMetadata.annotations/reserved-key")
		}
		if securityAnnotation(k) {
			adm("podMetadata.annotations/security-relevant")
		}
		if runes(k) > 317 {
			adm("podMetadata.annotations/key-too-long")
		}
		if len(validation.IsQualifiedName(strings.ToLower(k))) > 0 {
			add("podMetadata.annotations/invalid-key", atJob, true)
		}
		if over(val, lim.annotationValue) {
			adm("podMetadata.annotations/value-too-long")
		}
		if len(k)+len(val) > 256*1024 {
			add("podMetadata.annotations/too-large", atJob, true)
		}
		if strings.Contains(k, "kubernetes.io") {
			// Annotations the pod API interprets (seccomp, AppArmor,
			// tolerations, deletion cost, mirror pods).
			v.jobMaybe = append(v.jobMaybe, "spec.template.annotations", "spec.template.spec")
		}
	}
	if in.Mask&(bRequests|bLimits) != 0 {
		resourceProblems(in, add, &v)
	}
	return v
}

func envProblems(in input, adm func(string), add func(string, stage, bool)) {
	lim := crdLimits()
	if lim.envItems > 0 && in.Count > int64(lim.envItems) {
		adm("env/too-many")
	}
	for _, name := range in.envNames() {
		if name == "" || runes(name) > 256 || len(validation.IsEnvVarName(name)) > 0 {
			adm("env.name/invalid")
			break
		}
	}
	for _, name := range in.envNames() {
		if strings.HasPrefix(name, "TASK_HTTP_") {
			adm("env.name/reserved")
			break
		}
	}
	if in.Count == 0 {
		return
	}
	if in.has(bEnvValue) && over(in.EnvValue, lim.envValue) {
		adm("env.value/too-long")
	}
	sources := 0
	for _, b := range []uint64{bEnvSecret, bEnvConfigMap, bEnvFieldRef} {
		if in.has(b) {
			sources++
		}
	}
	if sources > 0 && in.has(bEnvValue) {
		adm("env/value-and-valueFrom")
	}
	if sources > 1 {
		adm("env.valueFrom/more-than-one-source")
	}
	if in.has(bEnvSecret) {
		keyRefProblems(in, "env.valueFrom.secretKeyRef", add)
	}
	if in.has(bEnvConfigMap) {
		keyRefProblems(in, "env.valueFrom.configMapKeyRef", add)
	}
	if in.has(bEnvFieldRef) {
		p := in.FieldPath
		switch {
		case p == "" || runes(p) > 256:
			adm("env.valueFrom.fieldRef/length")
		case validFieldPaths[p]:
		case fieldPathRE.MatchString(p):
			m := fieldPathRE.FindStringSubmatch(p)
			key := m[2]
			if m[1] == "annotations" {
				key = strings.ToLower(key)
			}
			if len(validation.IsQualifiedName(key)) > 0 {
				add("env.valueFrom.fieldRef/invalid-subscript", atJob, true)
			}
		default:
			add("env.valueFrom.fieldRef/unsupported-path", atJob, true)
		}
	}
}

// keyRefProblems judges a Secret or ConfigMap key selector.
func keyRefProblems(in input, field string, add func(string, stage, bool)) {
	switch {
	case in.SecretName == "" || runes(in.SecretName) > 253:
		add(field+".name/length", atAdmission, true)
	case len(validation.IsDNS1123Subdomain(in.SecretName)) > 0:
		add(field+".name/not-dns-subdomain", atJob, true)
	}
	switch {
	case in.SecretKey == "" || runes(in.SecretKey) > 253 || !keyRE.MatchString(in.SecretKey):
		add(field+".key/invalid", atAdmission, true)
	case len(validation.IsConfigMapKey(in.SecretKey)) > 0:
		add(field+".key/dot-or-dotdot", atJob, true)
	}
}

func resourceProblems(in input, add func(string, stage, bool), v *verdict) {
	v.jobMaybe = append(v.jobMaybe, "spec.template.spec.containers[0].resources")
	var req, lim *resource.Quantity
	for _, q := range []struct {
		bit uint64
		s   string
		dst **resource.Quantity
	}{{bRequests, in.Request, &req}, {bLimits, in.Limit, &lim}} {
		if !in.has(q.bit) {
			continue
		}
		parsed, err := resource.ParseQuantity(q.s)
		if err != nil {
			add("resources/not-a-quantity", atAdmission, true)
			return
		}
		*q.dst = &parsed
		if parsed.Sign() < 0 {
			add("resources/negative", atJob, true)
		}
	}
	if req != nil && lim != nil && req.Cmp(*lim) > 0 {
		add("resources/requests-above-limits", atJob, true)
	}
	if !isContainerResourceName(in.ResName) {
		add("resources/unknown-resource-name", atJob, true)
	}
}

// isContainerResourceName: cpu, memory, ephemeral-storage, hugepages-<size>
// or an extended resource (a domain-qualified name outside kubernetes.io).
func isContainerResourceName(n string) bool {
	switch {
	case n == "cpu" || n == "memory" || n == "ephemeral-storage":
		return true
	case strings.HasPrefix(n, "hugepages-"):
		return true
	case strings.Contains(n, "/") && len(validation.IsQualifiedName(n)) == 0:
		return !strings.Contains(strings.SplitN(n, "/", 2)[0], "kubernetes.io") && !strings.HasPrefix(n, "requests.")
	}
	return false
}

func reserved(k string) bool {
	for _, p := range reservedKeyPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return reservedKeys[k]
}

// scheduleProblem names a schedule the reconciler's parser refused, and
// says whether a CRD rule could have refused it.
func scheduleProblem(msg string) (string, bool) {
	switch {
	case strings.Contains(msg, "prefix is not supported"):
		return "schedule/tz-prefix", true
	case strings.Contains(msg, `"=" is not allowed`):
		return "schedule/equals-in-field", true
	case strings.Contains(msg, "unknown descriptor"), strings.Contains(msg, "takes no arguments"):
		return "schedule/unknown-descriptor", true
	case strings.Contains(msg, "@every"):
		// CEL's duration() parses Go-style durations.
		return "schedule/bad-every", true
	case strings.Contains(msg, "6 fields"), strings.Contains(msg, "field(s)"):
		return "schedule/field-count", true
	case strings.Contains(msg, "must not be empty"):
		// Only blanks (tabs and the like, which the CRD's pattern takes
		// for fields).
		return "schedule/blank", true
	case strings.Contains(msg, "never fires"):
		return "schedule/never-fires", false
	case strings.Contains(msg, "invalid"):
		// Values out of a field's range and unknown names are refused at
		// admission (a CEL rule per field); what gets here (a reversed
		// range, a step of 0) no regular expression of reasonable size
		// tells apart.
		return "schedule/invalid-field", false
	}
	return "schedule/other: " + msg, false
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

func (p problem) String() string { return fmt.Sprintf("%s@%s", p.id, p.stage) }

// imageChars is the character set of an image reference, as the CRD checks it.
var imageChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`)

// securityAnnotation is the CRD's rule on pod annotations that could
// weaken the pod's security: keys naming AppArmor, seccomp or SELinux, and
// container runtime keys.
func securityAnnotation(k string) bool {
	// CEL's lowerAscii: only A-Z change.
	lower := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, k)
	for _, w := range []string{"apparmor", "seccomp", "selinux"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	for _, p := range []string{"io.kubernetes.cri", "io.containerd.", "io.katacontainers.", "run.oci."} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
