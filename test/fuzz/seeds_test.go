package fuzz_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The seed corpus is written from the table below into
// testdata/fuzz/<target>/seed-<name> (the `go test fuzz v1` format), so
// each seed has a name that says what it is. Files the fuzzer adds
// (crashers, named by hash) live next to them.
//
//	FUZZ_WRITE_SEEDS=1 go test ./test/fuzz/ -run TestSeedCorpus
//
// rewrites the seed files; without it, TestSeedCorpus checks they match
// the table.

type seed struct {
	name string
	in   input
	play *play // FuzzReconcile seeds only
}

type mod func(*input)

func shellTask(mods ...mod) input {
	in := input{Name: "fuzz", Type: "shell", Shell: "echo hello", Mask: bShell}
	for _, m := range mods {
		m(&in)
	}
	return in
}

func httpTask(mods ...mod) input {
	return shellTask(append([]mod{func(in *input) {
		in.Type, in.Shell, in.URL = "http", "", "https://example.com/hook"
		in.Mask = in.Mask&^bShell | bURL
	}}, mods...)...)
}

func set(bit uint64, f func(*input)) mod {
	return func(in *input) { in.Mask |= bit; f(in) }
}
func unset(bit uint64) mod  { return func(in *input) { in.Mask &^= bit } }
func name(s string) mod     { return func(in *input) { in.Name = s } }
func typ(s string) mod      { return func(in *input) { in.Type = s } }
func shell(s string) mod    { return set(bShell, func(in *input) { in.Shell = s }) }
func withURL(s string) mod  { return set(bURL, func(in *input) { in.URL = s }) }
func schedule(s string) mod { return set(bSchedule, func(in *input) { in.Schedule = s }) }
func timeZone(s string) mod { return set(bTimeZone, func(in *input) { in.TimeZone = s }) }
func image(s string) mod    { return set(bImage, func(in *input) { in.Image = s }) }
func serviceAccount(s string) mod {
	return set(bServiceAccount, func(in *input) { in.ServiceAccount = s })
}
func concurrency(s string) mod { return set(bConcurrency, func(in *input) { in.Concurrency = s }) }
func replicas(n int64) mod     { return set(bReplicas, func(in *input) { in.Replicas = n }) }
func maxRetry(n int64) mod     { return set(bMaxRetry, func(in *input) { in.MaxRetry = n }) }
func activeDeadline(n int64) mod {
	return set(bActiveDeadline, func(in *input) { in.ActiveDeadline = n })
}
func startTimeout(n int64) mod { return set(bStartTimeout, func(in *input) { in.StartTimeout = n }) }
func startingDeadline(n int64) mod {
	return set(bStartingDeadline, func(in *input) { in.StartingDeadline = n })
}
func ttl(n int64) mod { return set(bTTL, func(in *input) { in.TTL = n }) }
func historyLimits(ok, failed int64) mod {
	return set(bHistoryOK|bHistoryFailed, func(in *input) { in.HistoryOK, in.HistoryFailed = ok, failed })
}
func suspend() mod           { return set(bSuspend|bSuspendTrue, func(*input) {}) }
func extra(json string) mod  { return func(in *input) { in.Extra = json } }
func big(field, n int64) mod { return func(in *input) { in.BigField, in.BigLen = field, n } }
func count(n int64) mod      { return func(in *input) { in.Count = n } }
func method(s string) mod    { return set(bHTTP|bMethod, func(in *input) { in.Method = s }) }
func body(s string) mod      { return set(bHTTP|bBody, func(in *input) { in.Body = s }) }
func successCode(n int64) mod {
	return set(bHTTP|bSuccessCodes, func(in *input) { in.SuccessCode = n })
}
func httpTimeout(n int64) mod {
	return set(bHTTP|bTimeoutSeconds, func(in *input) { in.TimeoutSeconds = n })
}
func label(k, v string) mod {
	return set(bLabels, func(in *input) { in.LabelKey, in.LabelValue = k, v })
}
func annotation(k, v string) mod {
	return set(bAnnotations, func(in *input) { in.AnnotationKey, in.AnnotationValue = k, v })
}
func fieldRef(envName, path string) mod {
	return env(envName, bEnvFieldRef, func(in *input) { in.FieldPath = path })
}
func envValue(envName, value string) mod {
	return env(envName, bEnvValue, func(in *input) { in.EnvValue = value })
}
func secretRef(secret, key string) mod {
	return func(in *input) { in.SecretName, in.SecretKey = secret, key }
}
func envSecret(envName, s, k string) mod { return env(envName, bEnvSecret, secretRef(s, k)) }
func envConfig(envName, s, k string) mod { return env(envName, bEnvConfigMap, secretRef(s, k)) }
func header(n, v string) mod {
	return headerWith(n, bHeaderValue, func(in *input) { in.HeaderValue = v })
}
func headerSecret(n, s, k string) mod { return headerWith(n, bHeaderSecret, secretRef(s, k)) }
func requests(res, q string) mod {
	return set(bRequests, func(in *input) { in.ResName, in.Request = res, q })
}
func limits(res, q string) mod {
	return set(bLimits, func(in *input) { in.ResName, in.Limit = res, q })
}
func backoff(initial, maxS, factor int64) mod {
	return set(bBackoff|bBackoffInitial|bBackoffMax|bBackoffFactor, func(in *input) {
		in.BackoffInitial, in.BackoffMax, in.BackoffFactor = initial, maxS, factor
	})
}
func backoffInitial(n int64) mod {
	return set(bBackoff|bBackoffInitial, func(in *input) { in.BackoffInitial = n })
}

func env(envName string, bit uint64, f mod) mod {
	return set(bit, func(in *input) {
		in.EnvName = envName
		if in.Count == 0 {
			in.Count = 1
		}
		f(in)
	})
}

func headerWith(n string, bit uint64, f mod) mod {
	return set(bHTTP|bit, func(in *input) {
		in.HeaderName = n
		if in.Count == 0 {
			in.Count = 1
		}
		f(in)
	})
}

// script encodes FuzzReconcile actions, one per step (at most 6).
func script(acts ...int) uint64 {
	var s uint64
	for i, a := range acts {
		s |= uint64(a) << (3 * i)
	}
	return s | uint64(max(len(acts)-2, 0))<<58
}

const longMessage = 1 << 57 // script bit: the pod message is stretched to 3000 runes

var admissionSeeds = []seed{
	// Valid baselines.
	{name: "valid-shell", in: shellTask()},
	{name: "valid-http", in: httpTask()},
	{name: "valid-cron", in: shellTask(schedule("*/5 * * * *"), timeZone("Europe/Berlin"))},
	{name: "valid-everything-shell", in: shellTask(image("busybox:1.36"), serviceAccount("runner.sa"), replicas(100), maxRetry(100),
		backoff(0, 86400, 10), activeDeadline(31536000), startTimeout(86400), ttl(0), historyLimits(0, 100),
		envValue("GREETING", "$(HOME) $$ héllo"), label("app", "demo"), annotation("example.com/x", "y"),
		requests("cpu", "100m"), limits("cpu", "1"), concurrency("Replace"), suspend())},
	{name: "valid-everything-http", in: httpTask(method("POST"), body(`{"a":"$(X)"}`), successCode(204), httpTimeout(3600),
		header("Authorization", "Bearer x"), count(32), schedule("@every 1h30m"), startingDeadline(0), concurrency("Allow"))},
	{name: "valid-http-secret-header", in: httpTask(headerSecret("X-Token", "api-token", "token"))},

	// Names.
	{name: "name-empty", in: shellTask(name(""))},
	{name: "name-dots", in: shellTask(name("my.task"))},
	{name: "name-63", in: shellTask(name(strings.Repeat("a", 63)))},
	{name: "name-64", in: shellTask(name(strings.Repeat("a", 64)))},
	{name: "name-upper-unicode", in: shellTask(name("Tâsk"))},

	// Type, shell, image.
	{name: "type-empty", in: shellTask(typ(""))},
	{name: "type-python", in: shellTask(typ("python"))},
	{name: "type-Shell", in: shellTask(typ("Shell"))},
	{name: "shell-empty", in: shellTask(shell(""))},
	{name: "shell-missing", in: shellTask(unset(bShell))},
	{name: "shell-32KiB", in: shellTask(big(bigShell, 32768))},
	{name: "shell-32KiB-plus-1", in: shellTask(big(bigShell, 32769))},
	{name: "shell-32K-runes-multibyte", in: shellTask(shell("é€😀"), big(bigShell, 32768))},
	{name: "shell-nul-and-dollars", in: shellTask(shell("echo \x00 $(HOME) $$ ${X} `id`"))},
	{name: "shell-invalid-utf8", in: shellTask(shell("echo \xff\xfe"))},
	{name: "image-on-http", in: httpTask(image("busybox"))},
	{name: "image-leading-space", in: shellTask(image(" busybox"))},
	{name: "image-empty", in: shellTask(image(""))},
	{name: "image-inner-space", in: shellTask(image("busy box"))},
	{name: "image-nbsp", in: shellTask(image("\u00a0busybox"))},
	{name: "image-vertical-tab", in: shellTask(image("busybox\v"))},
	{name: "image-inner-nbsp", in: shellTask(image("busy\u00a0box"))},
	{name: "image-1025", in: shellTask(image("b"), big(bigImage, 1025))},

	// URLs.
	{name: "url-2KiB", in: httpTask(withURL("https://example.com/"), big(bigURL, 2048))},
	{name: "url-2KiB-plus-1", in: httpTask(withURL("https://example.com/"), big(bigURL, 2049))},
	{name: "url-ftp", in: httpTask(withURL("ftp://example.com/x"))},
	{name: "url-relative", in: httpTask(withURL("/hook"))},
	{name: "url-userinfo", in: httpTask(withURL("https://user:p%40ss@example.com/"))},
	{name: "url-unicode-host", in: httpTask(withURL("https://exämple.com/päth"))},
	{name: "url-ipv6-port-0", in: httpTask(withURL("http://[::1]:0/"))},
	{name: "url-ipv6-unclosed", in: httpTask(withURL("http://[::1/"))},
	{name: "url-port-99999", in: httpTask(withURL("http://example.com:99999/"))},
	{name: "url-upper-scheme", in: httpTask(withURL("HTTPS://EXAMPLE.COM/"))},
	{name: "url-no-host", in: httpTask(withURL("https:///path"))},
	{name: "url-opaque", in: httpTask(withURL("http:example.com"))},
	{name: "url-crlf", in: httpTask(withURL("http://example.com/\r\nX-Injected: 1"))},
	{name: "url-space", in: httpTask(withURL("http://example.com/a b"))},
	{name: "url-fragment", in: httpTask(withURL("https://example.com/#frag"))},
	{name: "url-odd-host", in: httpTask(withURL("https://&000/"))},
	{name: "url-on-shell", in: shellTask(withURL("https://example.com/"))},

	// Schedules and zones.
	{name: "schedule-empty", in: shellTask(schedule(""))},
	{name: "schedule-cron-tz", in: shellTask(schedule("CRON_TZ=UTC * * * * *"))},
	{name: "schedule-tz-5-fields", in: shellTask(schedule("TZ=UTC * * * *"))},
	{name: "schedule-lowercase-cron-tz", in: shellTask(schedule("cron_tz=UTC * * * *"))},
	{name: "schedule-tz-inside-field", in: shellTask(schedule("0 TZ=UTC * * *"))},
	{name: "schedule-every-0s", in: shellTask(schedule("@every 0s"))},
	{name: "schedule-every-1500ms", in: shellTask(schedule("@every 1500ms"))},
	{name: "schedule-every-negative", in: shellTask(schedule("@every -1s"))},
	{name: "schedule-every-huge", in: shellTask(schedule("@every 2562047h"))},
	{name: "schedule-every-micro", in: shellTask(schedule("@every 1000000µs"))},
	{name: "schedule-6-fields", in: shellTask(schedule("0 * * * * *"))},
	{name: "schedule-3-fields", in: shellTask(schedule("* * *"))},
	{name: "schedule-minute-61", in: shellTask(schedule("61 * * * *"))},
	{name: "schedule-step-0", in: shellTask(schedule("*/0 * * * *"))},
	{name: "schedule-feb-30", in: shellTask(schedule("0 0 30 2 *"))},
	{name: "schedule-feb-29", in: shellTask(schedule("0 0 29 2 *"))},
	{name: "schedule-names", in: shellTask(schedule("0 9 * JAN-DEC MON-FRI"))},
	{name: "schedule-reboot", in: shellTask(schedule("@reboot"))},
	{name: "schedule-unknown-descriptor", in: shellTask(schedule("@fortnightly"))},
	{name: "schedule-descriptor-argument", in: shellTask(schedule("@hourly 5"))},
	{name: "schedule-leading-space", in: shellTask(schedule(" @hourly"))},
	{name: "schedule-tabs", in: shellTask(schedule("0\t9\t*\t*\t*"))},
	{name: "schedule-nbsp", in: shellTask(schedule("0\u00a09 * * *"))},
	{name: "schedule-every-nbsp", in: shellTask(schedule("@every\u00a01h"))},
	{name: "schedule-arabic-digits", in: shellTask(schedule("٣ * * * *"))},
	{name: "schedule-256", in: shellTask(schedule("0,"), big(bigSchedule, 256))},
	{name: "schedule-tab-fields", in: shellTask(schedule("\t \t \t \t \t"))},
	{name: "schedule-question-mark", in: shellTask(schedule("0 0 ? * *"))},
	{name: "schedule-hash", in: shellTask(schedule("0 0 * * 1#2"))},
	{name: "timezone-local", in: shellTask(schedule("@hourly"), timeZone("Local"))},
	{name: "timezone-unknown", in: shellTask(schedule("@hourly"), timeZone("Mars/Olympus"))},
	{name: "timezone-dotdot", in: shellTask(schedule("@hourly"), timeZone("../etc/passwd"))},
	{name: "timezone-empty", in: shellTask(schedule("@hourly"), timeZone(""))},
	{name: "timezone-lowercase-utc", in: shellTask(schedule("@hourly"), timeZone("utc"))},
	{name: "timezone-etc-gmt", in: shellTask(schedule("@hourly"), timeZone("Etc/GMT+5"))},
	{name: "timezone-without-schedule", in: shellTask(timeZone("UTC"))},
	{name: "ttl-with-schedule", in: shellTask(schedule("@daily"), ttl(60))},
	{name: "starting-deadline-without-schedule", in: shellTask(startingDeadline(10))},

	// Numbers.
	{name: "replicas-0", in: shellTask(replicas(0))},
	{name: "replicas-101", in: shellTask(replicas(101))},
	{name: "replicas-huge", in: shellTask(replicas(1 << 40))},
	{name: "max-retry-negative", in: shellTask(maxRetry(-1))},
	{name: "max-retry-int64-max", in: shellTask(maxRetry(1<<63 - 1))},
	{name: "backoff-max-below-initial", in: shellTask(backoff(60, 10, 2))},
	{name: "backoff-initial-above-default-max", in: shellTask(backoffInitial(500))},
	{name: "backoff-factor-0", in: shellTask(backoff(1, 2, 0))},
	{name: "backoff-empty", in: shellTask(set(bBackoff, func(*input) {}))},
	{name: "active-deadline-0", in: shellTask(activeDeadline(0))},
	{name: "start-timeout-86401", in: shellTask(startTimeout(86401))},
	{name: "concurrency-unknown", in: shellTask(concurrency("Sometimes"))},

	// HTTP.
	{name: "http-on-shell", in: shellTask(method("GET"))},
	{name: "method-lowercase", in: httpTask(method("get"))},
	{name: "method-empty", in: httpTask(method(""))},
	{name: "success-code-99", in: httpTask(successCode(99))},
	{name: "timeout-0", in: httpTask(httpTimeout(0))},
	{name: "header-name-space", in: httpTask(header("X Key", "v"))},
	{name: "header-name-colon", in: httpTask(header("X-Key:", "v"))},
	{name: "header-name-empty", in: httpTask(header("", "v"))},
	{name: "header-value-crlf", in: httpTask(header("X-Key", "a\r\nX-Injected: 1"))},
	{name: "header-value-nul", in: httpTask(header("X-Key", "a\x00b"))},
	{name: "header-value-8KiB-plus-1", in: httpTask(header("X-Key", "v"), big(bigHeaderValue, 8193))},
	{name: "header-value-and-secret", in: httpTask(header("X-Key", "v"), headerSecret("X-Key", "s", "k"))},
	{name: "header-secret-name-upper", in: httpTask(headerSecret("X-Key", "MySecret", "k"))},
	{name: "header-secret-key-dotdot", in: httpTask(headerSecret("X-Key", "s", ".."))},
	{name: "header-secret-key-dotdot-prefix", in: httpTask(headerSecret("X-Key", "s", "..key"))},
	{name: "headers-33", in: httpTask(header("X-Key", "v"), count(33))},
	{name: "header-host", in: httpTask(header("Host", "evil.example"))},

	// Env.
	{name: "env-task-http-prefix", in: httpTask(envValue("TASK_HTTP_URL", "https://evil.example"))},
	{name: "env-task-http-lowercase", in: httpTask(envValue("task_http_url", "x"))},
	{name: "env-name-digit", in: shellTask(envValue("1BAD", "x"))},
	{name: "env-name-equals", in: shellTask(envValue("A=B", "x"))},
	{name: "env-64", in: shellTask(envValue("VAR", "x"), count(64))},
	{name: "env-65", in: shellTask(envValue("VAR", "x"), count(65))},
	{name: "env-value-and-valuefrom", in: shellTask(envValue("A", "x"), envSecret("A", "s", "k"))},
	{name: "env-two-sources", in: shellTask(envSecret("A", "s", "k"), envConfig("A", "s", "k"))},
	{name: "env-secret-name-upper", in: shellTask(envSecret("A", "MySecret", "k"))},
	{name: "env-secret-key-dot", in: shellTask(envSecret("A", "s", "."))},
	{name: "env-configmap-name-dots", in: shellTask(envConfig("A", "a..b", "k"))},
	{name: "env-fieldref-name", in: shellTask(fieldRef("A", "metadata.name"))},
	{name: "env-fieldref-label", in: shellTask(fieldRef("A", "metadata.labels['app']"))},
	{name: "env-fieldref-bad-label", in: shellTask(fieldRef("A", "metadata.labels['bad key']"))},
	{name: "env-fieldref-unsupported", in: shellTask(fieldRef("A", "spec.containers[0].image"))},
	{name: "env-fieldref-traversal", in: shellTask(fieldRef("A", "../etc"))},
	{name: "env-fieldref-symbol", in: shellTask(fieldRef("A", "<"))},
	{name: "env-value-nul", in: shellTask(envValue("A", "x\x00y"))},
	{name: "env-64-values-32KiB", in: shellTask(envValue("VAR", "x"), count(64), big(bigEnvValue, 32768))},
	{name: "env-value-4KiB-plus-1", in: shellTask(envValue("VAR", "x"), big(bigEnvValue, 4097))},
	{name: "env-64-values-4K-control-chars", in: shellTask(envValue("VAR", "\x01"), count(64), big(bigEnvValue, 4096))},

	// Pod metadata.
	{name: "label-reserved-run", in: shellTask(label("batch.taskops.io/run", "x"))},
	{name: "label-reserved-mixed-case", in: shellTask(label("Batch.Taskops.io/run", "x"))},
	{name: "label-job-name-upper", in: shellTask(label("JOB-NAME", "x"))},
	{name: "label-controller-uid", in: shellTask(label("controller-uid", "x"))},
	{name: "label-batch-kubernetes", in: shellTask(label("batch.kubernetes.io/job-name", "x"))},
	{name: "label-managed-by-mixed-case", in: shellTask(label("app.kubernetes.io/Managed-By", "x"))},
	{name: "label-key-space", in: shellTask(label("a b", "x"))},
	{name: "label-key-empty", in: shellTask(label("", "x"))},
	{name: "label-value-64", in: shellTask(label("app", "v"), big(bigLabelValue, 64))},
	{name: "label-value-unicode", in: shellTask(label("app", "dämon"))},
	{name: "annotation-job-name", in: shellTask(annotation("job-name", "x"))},
	{name: "annotation-key-upper", in: shellTask(annotation("Example.com/Key", "x"))},
	{name: "annotation-too-large", in: shellTask(annotation("example.com/big", "x"), big(bigAnnotationValue, 262145))},
	{name: "annotation-seccomp-unconfined", in: shellTask(annotation("seccomp.security.alpha.kubernetes.io/pod", "unconfined"))},
	{name: "annotation-apparmor-bogus", in: shellTask(annotation("container.apparmor.security.beta.kubernetes.io/task", "bogus"))},
	{name: "annotation-deletion-cost", in: shellTask(annotation("controller.kubernetes.io/pod-deletion-cost", "abc"))},

	// Resources.
	{name: "resources-requests-above-limits", in: shellTask(requests("cpu", "2"), limits("cpu", "1"))},
	{name: "resources-negative", in: shellTask(requests("memory", "-1"))},
	{name: "resources-exponent-fraction", in: shellTask(limits("cpu", "1e1.5"))},
	{name: "resources-exponent-trailing-dot", in: shellTask(limits("cpu", "0e0."))},
	{name: "resources-unknown-name", in: shellTask(requests("gpu", "1"))},
	{name: "resources-extended", in: shellTask(requests("example.com/gpu", "1"), limits("example.com/gpu", "1"))},
	{name: "resources-extended-no-limit", in: shellTask(requests("example.com/gpu", "1"))},
	{name: "resources-hugepages-alone", in: shellTask(limits("hugepages-2Mi", "2Mi"))},
	{name: "resources-huge-exponent", in: shellTask(limits("memory", "1e9223372036854775807"))},
	{name: "resources-tiny-cpu", in: shellTask(requests("cpu", "0.0001"))},

	// Service accounts.
	{name: "service-account-dotdot", in: shellTask(serviceAccount("a..b"))},
	{name: "service-account-empty", in: shellTask(serviceAccount(""))},
	{name: "service-account-upper", in: shellTask(serviceAccount("Runner"))},

	// Raw JSON over the spec.
	{name: "extra-replicas-string", in: shellTask(extra(`{"replicas":"3"}`))},
	{name: "extra-replicas-float", in: shellTask(extra(`{"replicas":1.5}`))},
	{name: "extra-replicas-null", in: shellTask(extra(`{"replicas":null}`))},
	{name: "extra-backoff-null", in: shellTask(extra(`{"backoff":null}`))},
	{name: "extra-unknown-field", in: shellTask(extra(`{"command":["rm","-rf","/"]}`))},
	{name: "extra-empty-header", in: httpTask(extra(`{"http":{"headers":[{}]}}`))},
	{name: "extra-duplicate-env", in: shellTask(extra(`{"env":[{"name":"A"},{"name":"A"}]}`))},
	{name: "extra-duplicate-success-codes", in: httpTask(extra(`{"http":{"successCodes":[200,200]}}`))},
	{name: "extra-quantity-number-overflow", in: shellTask(extra(`{"resources":{"limits":{"cpu":1e400}}}`))},
	{name: "extra-label-value-number", in: shellTask(extra(`{"podMetadata":{"labels":{"a":1}}}`))},
	{name: "extra-type-null", in: shellTask(extra(`{"type":null}`))},
	{name: "extra-spec-array", in: shellTask(extra(`{"env":{"A":"b"}}`))},
}

var reconcileSeeds = []seed{
	{name: "retries-exhausted", in: shellTask(maxRetry(2), backoff(0, 0, 1)),
		play: &play{script: script(actFailPod, actNothing, actFailDeadline, actWake, actFailPod, actNothing), message: "boom", exitCode: 1}},
	{name: "succeeds-second-attempt", in: shellTask(maxRetry(1)),
		play: &play{script: script(actFailPod, actWake, actComplete, actNothing), message: "done", exitCode: 3}},
	{name: "http-not-retryable", in: httpTask(maxRetry(5)),
		play: &play{script: script(actFailPolicy, actWake, actNothing), message: "bad request definition"}},
	{name: "long-multibyte-message", in: shellTask(maxRetry(1), backoff(0, 0, 1)),
		play: &play{script: script(actFailPod, actWake, actFailPod, actNothing) | longMessage, message: "é€😀\x00\xff", exitCode: 137}},
	{name: "cron-every-minute", in: shellTask(schedule("@every 1m"), maxRetry(1)),
		play: &play{script: script(actWake, actFailPod, actWake, actComplete, actWake, actFarFuture), message: "x"}},
	{name: "cron-far-future-missed", in: shellTask(schedule("*/5 * * * *"), startingDeadline(30), timeZone("America/New_York")),
		play: &play{script: script(actFarFuture, actComplete, actFarFuture, actWake, actComplete), message: "ok"}},
	{name: "invalid-schedule-local", in: shellTask(schedule("@hourly"), timeZone("Local")),
		play: &play{script: script(actWake, actFarFuture, actRunNow)}},
	{name: "invalid-schedule-every-0s", in: shellTask(schedule("@every 0s")),
		play: &play{script: script(actWake, actRunNow)}},
	{name: "invalid-spec-requests-above-limits", in: shellTask(requests("cpu", "2"), limits("cpu", "1")),
		play: &play{script: script(actWake, actRunNow, actNothing)}},
	{name: "invalid-spec-fieldref", in: shellTask(fieldRef("A", "spec.containers[0].image")),
		play: &play{script: script(actRunNow, actWake)}},
	{name: "invalid-spec-cron-secret-key", in: httpTask(schedule("@every 1m"), headerSecret("X-Key", "s", "..")),
		play: &play{script: script(actWake, actWake, actRunNow)}},
	{name: "run-now-weird-token", in: shellTask(maxRetry(1), concurrency("Replace")),
		play: &play{script: script(actRunNow, actRunNow, actFailPod, actRunNow, actWake), message: "tøken\x00\n with spaces"}},
	{name: "run-now-allow", in: shellTask(concurrency("Allow"), maxRetry(2), backoff(1, 1, 1)),
		play: &play{script: script(actRunNow, actFailPod, actRunNow, actFailDeadline, actWake, actComplete), message: "t"}},
	{name: "suspended-run-now", in: shellTask(suspend(), maxRetry(1)),
		play: &play{script: script(actRunNow, actFailPod, actWake, actComplete), message: "s"}},
	{name: "ttl-expiry", in: shellTask(ttl(0)),
		play: &play{script: script(actComplete, actNothing, actWake), message: "bye"}},
	{name: "history-limits-zero", in: shellTask(historyLimits(0, 0), maxRetry(1)),
		play: &play{script: script(actFailPod, actWake, actFailPod, actRunNow, actComplete, actRunNow), message: "h"}},
	{name: "start-timeout", in: shellTask(startTimeout(1), maxRetry(1), backoff(0, 0, 1)),
		play: &play{script: script(actWake, actWake, actWake, actFarFuture)}},
	{name: "replicas-100-long-name", in: shellTask(name(strings.Repeat("x", 60)), replicas(100), maxRetry(100), backoff(0, 0, 1)),
		play: &play{script: script(actFailPod, actWake, actFailPod, actWake, actFailPod, actWake), message: "wide", exitCode: 255}},
	{name: "http-everything", in: httpTask(method("PATCH"), body("$(A) $$"), header("X-A", "b"), count(3), envValue("A", "b"), maxRetry(1)),
		play: &play{script: script(actFailPod, actWake, actComplete), message: "{\"status\":500}"}},
	{name: "env-64-values-32KiB", in: shellTask(envValue("VAR", "x"), count(64), big(bigEnvValue, 32768)),
		play: &play{script: script(actComplete)}},
	{name: "env-64-values-4K-control-chars", in: shellTask(envValue("VAR", "\x01"), count(64), big(bigEnvValue, 4096)),
		play: &play{script: script(actComplete)}},
	{name: "headers-32-values-4K-control-chars", in: httpTask(header("X-A", "\x7f"), count(32), big(bigHeaderValue, 4096)),
		play: &play{script: script(actComplete)}},
	{name: "big-shell-dollars", in: shellTask(shell("$"), big(bigShell, 32768), maxRetry(1)),
		play: &play{script: script(actFailPod, actWake)}},
}

// fileName is the corpus file of a seed.
func fileName(s seed) string {
	return "seed-" + regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(s.name), "-")
}

func (s seed) values() []any {
	v := s.in.values()
	if s.play != nil {
		v = append(v, s.play.script, s.play.message, s.play.exitCode)
	}
	return v
}

// marshalCorpus writes values in the `go test fuzz v1` format.
func marshalCorpus(vals []any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch t := v.(type) {
		case string:
			fmt.Fprintf(&b, "string(%q)\n", t)
		case int64, uint64:
			fmt.Fprintf(&b, "%T(%v)\n", t, t)
		default:
			panic(fmt.Sprintf("unsupported corpus type %T", v))
		}
	}
	return b.Bytes()
}

func TestSeedCorpus(t *testing.T) {
	write := os.Getenv("FUZZ_WRITE_SEEDS") != ""
	for target, seeds := range map[string][]seed{"FuzzTaskAdmission": admissionSeeds, "FuzzReconcile": reconcileSeeds} {
		dir := filepath.Join("testdata", "fuzz", target)
		if write {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, f := range old {
				_ = os.Remove(f)
			}
		}
		names := map[string]bool{}
		for _, s := range seeds {
			fn := fileName(s)
			if names[fn] {
				t.Errorf("%s: two seeds named %s", target, fn)
			}
			names[fn] = true
			if (s.play != nil) != (target == "FuzzReconcile") {
				t.Errorf("%s: seed %s has the wrong arguments", target, s.name)
			}
			want := marshalCorpus(s.values())
			path := filepath.Join(dir, fn)
			if write {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s is missing or stale: FUZZ_WRITE_SEEDS=1 go test ./test/fuzz/ -run TestSeedCorpus", path)
			}
		}
		if !write {
			files, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
			for _, f := range files {
				if !names[filepath.Base(f)] {
					t.Errorf("%s is not in the seed table", f)
				}
			}
		}
	}
}
