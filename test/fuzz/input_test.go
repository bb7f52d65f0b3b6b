package fuzz_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// input is one fuzz input: the values a Task spec is built from. The fuzz
// targets take these as typed arguments, in this order (see values), which
// lets the fuzzer mutate each field on its own. Optional fields are present
// only when their bit in Mask is set, so "absent", "empty" and "zero" are
// all explored.
type input struct {
	Name, Type, Shell, URL, Schedule, TimeZone, Concurrency, Image, ServiceAccount string
	Method, Body, HeaderName, HeaderValue, SecretName, SecretKey                   string
	EnvName, EnvValue, FieldPath, LabelKey, LabelValue, AnnotationKey              string
	AnnotationValue, ResName, Request, Limit                                       string
	// Extra is a JSON object merged over the built spec (nulls, wrong types,
	// unknown fields, anything the typed fields cannot say).
	Extra string

	Replicas, MaxRetry, BackoffInitial, BackoffMax, BackoffFactor int64
	ActiveDeadline, StartTimeout, StartingDeadline, TTL           int64
	HistoryOK, HistoryFailed, SuccessCode, TimeoutSeconds         int64
	// Count is how many env entries and headers there are (names get an
	// index suffix from the second one on).
	Count int64
	// BigField stretches one string field (see stretchable) to BigLen runes,
	// so limits (32 KiB shell, 2 KiB URL, 256 KiB of annotations, the
	// object size etcd accepts) are reachable.
	BigField, BigLen int64
	Mask             uint64
}

// Presence bits of input.Mask.
const (
	bShell uint64 = 1 << iota
	bURL
	bSchedule
	bTimeZone
	bConcurrency
	bImage
	bServiceAccount
	bHTTP
	bMethod
	bBody
	bHeaderValue
	bHeaderSecret
	bEnvValue
	bEnvSecret
	bEnvConfigMap
	bEnvFieldRef
	bLabels
	bAnnotations
	bRequests
	bLimits
	bReplicas
	bMaxRetry
	bBackoff
	bBackoffInitial
	bBackoffMax
	bBackoffFactor
	bActiveDeadline
	bStartTimeout
	bStartingDeadline
	bTTL
	bHistoryOK
	bHistoryFailed
	bSuccessCodes
	bTimeoutSeconds
	bSuspend
	bSuspendTrue
	bKeyOptional
)

func (in input) has(bit uint64) bool { return in.Mask&bit != 0 }

// values are the fuzz arguments of in, in the fuzz targets' order.
func (in input) values() []any {
	return []any{
		in.Name, in.Type, in.Shell, in.URL, in.Schedule, in.TimeZone, in.Concurrency, in.Image, in.ServiceAccount,
		in.Method, in.Body, in.HeaderName, in.HeaderValue, in.SecretName, in.SecretKey,
		in.EnvName, in.EnvValue, in.FieldPath, in.LabelKey, in.LabelValue, in.AnnotationKey,
		in.AnnotationValue, in.ResName, in.Request, in.Limit, in.Extra,
		in.Replicas, in.MaxRetry, in.BackoffInitial, in.BackoffMax, in.BackoffFactor,
		in.ActiveDeadline, in.StartTimeout, in.StartingDeadline, in.TTL,
		in.HistoryOK, in.HistoryFailed, in.SuccessCode, in.TimeoutSeconds,
		in.Count, in.BigField, in.BigLen, in.Mask,
	}
}

// Fields BigField can stretch.
const (
	bigNone int64 = iota
	bigShell
	bigURL
	bigBody
	bigHeaderValue
	bigEnvValue
	bigLabelValue
	bigAnnotationValue
	bigImage
	bigSchedule
	bigName
	bigLabelKey
	bigAnnotationKey
	bigSecretName
	bigFieldPath
	bigHeaderName
	bigEnvName
	bigServiceAccount
	bigTimeZone
	bigCount
)

const (
	maxBig = 300_000
	// maxBigRepeated bounds a stretched field that is repeated Count times
	// (env and header entries): 64 env values of 32 KiB must be reachable,
	// hundreds of megabytes need not be.
	maxBigRepeated = 40_000
	maxCount       = 70
)

// normalize applies the stretching and clamps counts, so what the checks
// see is exactly what was sent.
func (in input) normalize() input {
	in.Count = clamp(in.Count, 0, maxCount)
	n := int(clamp(in.BigLen, 0, maxBig))
	field := ((in.BigField % bigCount) + bigCount) % bigCount
	switch field {
	case bigHeaderValue, bigEnvValue, bigHeaderName, bigEnvName:
		n = min(n, maxBigRepeated)
	}
	p := map[int64]*string{
		bigShell: &in.Shell, bigURL: &in.URL, bigBody: &in.Body, bigHeaderValue: &in.HeaderValue,
		bigEnvValue: &in.EnvValue, bigLabelValue: &in.LabelValue, bigAnnotationValue: &in.AnnotationValue,
		bigImage: &in.Image, bigSchedule: &in.Schedule, bigName: &in.Name, bigLabelKey: &in.LabelKey,
		bigAnnotationKey: &in.AnnotationKey, bigSecretName: &in.SecretName, bigFieldPath: &in.FieldPath,
		bigHeaderName: &in.HeaderName, bigEnvName: &in.EnvName, bigServiceAccount: &in.ServiceAccount,
		bigTimeZone: &in.TimeZone,
	}[field]
	if p != nil {
		*p = stretch(*p, n)
	}
	in.BigField, in.BigLen = 0, 0
	return in
}

// stretch repeats s (its runes) until it is n runes long; an empty s
// stretches as "a".
func stretch(s string, n int) string {
	if s == "" {
		s = "a"
	}
	r := []rune(s)
	out := make([]rune, n)
	for i := range out {
		out[i] = r[i%len(r)]
	}
	return string(out)
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// envNames are the names of the env entries.
func (in input) envNames() []string {
	names := make([]string, in.Count)
	for i := range names {
		names[i] = in.EnvName
		if i > 0 {
			names[i] += "_" + strconv.Itoa(i)
		}
	}
	return names
}

func (in input) headerNames() []string {
	names := make([]string, in.Count)
	for i := range names {
		names[i] = in.HeaderName
		if i > 0 {
			names[i] += "-" + strconv.Itoa(i)
		}
	}
	return names
}

func (in input) hasEnv() bool {
	return in.Mask&(bEnvValue|bEnvSecret|bEnvConfigMap|bEnvFieldRef) != 0
}

func (in input) hasHeaders() bool {
	return in.has(bHTTP) && in.Mask&(bHeaderValue|bHeaderSecret) != 0
}

// spec builds the Task spec as JSON-shaped data, so any value, even one
// the Go types cannot hold, reaches the API server.
func (in input) spec() map[string]any {
	s := map[string]any{"type": in.Type}
	set := func(bit uint64, key string, v any) {
		if in.has(bit) {
			s[key] = v
		}
	}
	set(bShell, "shell", in.Shell)
	set(bURL, "url", in.URL)
	set(bSchedule, "schedule", in.Schedule)
	set(bTimeZone, "timeZone", in.TimeZone)
	set(bConcurrency, "concurrencyPolicy", in.Concurrency)
	set(bImage, "image", in.Image)
	set(bServiceAccount, "serviceAccountName", in.ServiceAccount)
	set(bReplicas, "replicas", in.Replicas)
	set(bMaxRetry, "maxRetry", in.MaxRetry)
	set(bActiveDeadline, "activeDeadlineSeconds", in.ActiveDeadline)
	set(bStartTimeout, "startTimeoutSeconds", in.StartTimeout)
	set(bStartingDeadline, "startingDeadlineSeconds", in.StartingDeadline)
	set(bTTL, "ttlSecondsAfterFinished", in.TTL)
	set(bHistoryOK, "successfulRunsHistoryLimit", in.HistoryOK)
	set(bHistoryFailed, "failedRunsHistoryLimit", in.HistoryFailed)
	set(bSuspend, "suspend", in.has(bSuspendTrue))
	if in.has(bBackoff) {
		b := map[string]any{}
		if in.has(bBackoffInitial) {
			b["initialSeconds"] = in.BackoffInitial
		}
		if in.has(bBackoffMax) {
			b["maxSeconds"] = in.BackoffMax
		}
		if in.has(bBackoffFactor) {
			b["factor"] = in.BackoffFactor
		}
		s["backoff"] = b
	}
	if in.has(bHTTP) {
		hs := map[string]any{}
		if in.has(bMethod) {
			hs["method"] = in.Method
		}
		if in.has(bBody) {
			hs["body"] = in.Body
		}
		if in.has(bSuccessCodes) {
			hs["successCodes"] = []any{in.SuccessCode}
		}
		if in.has(bTimeoutSeconds) {
			hs["timeoutSeconds"] = in.TimeoutSeconds
		}
		if in.hasHeaders() {
			headers := []any{}
			for _, name := range in.headerNames() {
				hd := map[string]any{"name": name}
				if in.has(bHeaderValue) {
					hd["value"] = in.HeaderValue
				}
				if in.has(bHeaderSecret) {
					hd["valueFrom"] = map[string]any{"secretKeyRef": in.keyRef()}
				}
				headers = append(headers, hd)
			}
			hs["headers"] = headers
		}
		s["http"] = hs
	}
	if in.hasEnv() {
		env := []any{}
		for _, name := range in.envNames() {
			e := map[string]any{"name": name}
			if in.has(bEnvValue) {
				e["value"] = in.EnvValue
			}
			from := map[string]any{}
			if in.has(bEnvSecret) {
				from["secretKeyRef"] = in.keyRef()
			}
			if in.has(bEnvConfigMap) {
				from["configMapKeyRef"] = in.keyRef()
			}
			if in.has(bEnvFieldRef) {
				from["fieldRef"] = map[string]any{"fieldPath": in.FieldPath}
			}
			if len(from) > 0 {
				e["valueFrom"] = from
			}
			env = append(env, e)
		}
		s["env"] = env
	}
	if in.Mask&(bLabels|bAnnotations) != 0 {
		pm := map[string]any{}
		if in.has(bLabels) {
			pm["labels"] = map[string]any{in.LabelKey: in.LabelValue}
		}
		if in.has(bAnnotations) {
			pm["annotations"] = map[string]any{in.AnnotationKey: in.AnnotationValue}
		}
		s["podMetadata"] = pm
	}
	if in.Mask&(bRequests|bLimits) != 0 {
		r := map[string]any{}
		if in.has(bRequests) {
			r["requests"] = map[string]any{in.ResName: in.Request}
		}
		if in.has(bLimits) {
			r["limits"] = map[string]any{in.ResName: in.Limit}
		}
		s["resources"] = r
	}
	if extra := in.extra(); extra != nil {
		merge(s, extra)
	}
	return s
}

func (in input) keyRef() map[string]any {
	ref := map[string]any{"name": in.SecretName, "key": in.SecretKey}
	if in.has(bKeyOptional) {
		ref["optional"] = true
	}
	return ref
}

// extra is Extra as a JSON object, or nil when it is not one (or empty).
func (in input) extra() map[string]any {
	if strings.TrimSpace(in.Extra) == "" {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader([]byte(in.Extra)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}

// merge is a JSON merge patch without deletion: objects merge key by key,
// anything else (null included) replaces.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// task is the Task object of in in namespace ns, named name.
func (in input) task(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "Task",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       in.spec(),
	}}
	return u
}

// String describes the input for failure messages: the name and the spec
// as sent, long strings cut.
func (in input) String() string {
	spec, _ := json.Marshal(in.spec())
	return fmt.Sprintf("{name=%s spec=%s}", short(in.Name), short(string(spec)))
}

// short quotes s, cut to about 300 bytes.
func short(s string) string {
	const n = 300
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q...(%d bytes)", s[:n], len(s))
}
