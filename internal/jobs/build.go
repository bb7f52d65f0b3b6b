package jobs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/params"
	"github.com/taskops/task-operator/internal/results"
	"github.com/taskops/task-operator/internal/runs"
)

// Options are the operator-wide defaults a Job is built with; they come from
// manager flags.
type Options struct {
	// ShellImage runs shell Tasks that do not set spec.image (--shell-image).
	ShellImage string
	// RunnerImage runs http Tasks (--runner-image): the operator's own image,
	// which ships /task-runner.
	RunnerImage string
}

// ContainerName is the name of the single container of a Task's pod. The
// podFailurePolicy exit-code rule refers to it.
const ContainerName = "task"

// DefaultRunAsID is the uid and gid pods run as. It is numeric and non-root
// so that the Pod Security Standard "restricted" admits the pod and images
// whose default user is root (busybox, alpine) still start.
const DefaultRunAsID int64 = 65532

const (
	// runnerCommand and runnerHTTPArg start the http runner in the runner image.
	runnerCommand = "/task-runner"
	runnerHTTPArg = "http"

	// runnerExitNotRetryable is the runner's exit code for "bad request
	// definition": retrying cannot help, so the Job fails at once with reason
	// PodFailurePolicy and the controller ends the run as NotRetryable.
	runnerExitNotRetryable int32 = 2
	// runnerExitClientError is the runner's exit code for an unexpected 4xx
	// other than 408, 425 and 429 (httprunner.ExitClientError): not retried
	// either, unless spec.http.retryAllFailures.
	runnerExitClientError int32 = 9

	defaultHTTPMethod         = "GET"
	defaultHTTPTimeoutSeconds = 30
)

// Environment variables the http runner reads its request from.
const (
	EnvHTTPURL            = "TASK_HTTP_URL"
	EnvHTTPMethod         = "TASK_HTTP_METHOD"
	EnvHTTPBody           = "TASK_HTTP_BODY"
	EnvHTTPSuccessCodes   = "TASK_HTTP_SUCCESS_CODES"
	EnvHTTPTimeoutSeconds = "TASK_HTTP_TIMEOUT_SECONDS"
	// EnvHTTPHeaderPrefix starts the per-header variables
	// TASK_HTTP_HEADER_<i>_NAME, _VALUE and _SENSITIVE.
	EnvHTTPHeaderPrefix = "TASK_HTTP_HEADER_"
	// EnvHTTPResultPrefix starts the per-result variables
	// TASK_HTTP_RESULT_<i>_NAME and _FROM (spec.http.results).
	EnvHTTPResultPrefix = "TASK_HTTP_RESULT_"
)

// Build returns the Job of attempt `attempt` of run `runID` of the Task.
// scheduled is the slot of a scheduled run (nil otherwise); values are the
// run's params (params.Resolve), the same for every attempt of the run.
// Build is pure: it reads the Task without changing it and shares no maps
// or slices with it.
func Build(task *v1alpha1.Task, runID string, attempt int32, scheduled *time.Time, values map[string]string, opts Options) *batchv1.Job {
	a := jobAnnotations(task, scheduled)
	if enc := params.Encode(values); enc != "" {
		a[v1alpha1.AnnotationParams] = enc
	}
	spec := jobSpec(task, runID, attempt, scheduled, values, opts)
	a[v1alpha1.AnnotationRetryableExitRule] = strconv.Itoa(len(spec.PodFailurePolicy.Rules) - 1)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            Name(task, runID, attempt),
			Namespace:       task.Namespace,
			Labels:          jobLabels(task, runID, attempt),
			Annotations:     a,
			OwnerReferences: []metav1.OwnerReference{ownerRef(task)},
		},
		Spec: spec,
	}
}

// jobLabels are the contract's labels on every child Job and its pods: they
// let the controller list a Task's Jobs by run and attempt without parsing
// names.
func jobLabels(task *v1alpha1.Task, runID string, attempt int32) map[string]string {
	l := map[string]string{
		v1alpha1.LabelTask:      task.Name,
		v1alpha1.LabelRun:       runID,
		v1alpha1.LabelAttempt:   strconv.FormatInt(int64(attempt), 10),
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
	}
	if task.Spec.QueueName != "" {
		// The queue that admitted the attempt finds its Jobs by it.
		l[v1alpha1.LabelQueue] = task.Spec.QueueName
	}
	for _, k := range []string{v1alpha1.LabelKueueQueueName, v1alpha1.LabelKueuePriorityClass} {
		if v := task.Labels[k]; v != "" {
			l[k] = v
		}
	}
	return l
}

// jobAnnotations record what the Job was made from, for the run history:
// the Task generation and, for a scheduled run, its slot; and the cancel
// token the Task carries as the Job is made, which predates the Job and so
// never stops it (plan/cancel.go), whether or not a status recorded it by
// then.
func jobAnnotations(task *v1alpha1.Task, scheduled *time.Time) map[string]string {
	a := map[string]string{
		v1alpha1.AnnotationGeneration: strconv.FormatInt(task.Generation, 10),
	}
	if scheduled != nil {
		a[v1alpha1.AnnotationScheduledTime] = scheduled.UTC().Format(time.RFC3339)
	}
	if token := task.Annotations[v1alpha1.AnnotationCancel]; token != "" {
		a[v1alpha1.AnnotationCancelToken] = runs.TokenHash(token)
	}
	return a
}

// ownerRef makes the Task the Job's controller: the garbage collector deletes
// the Job with the Task, and a Job with this name counts as ours only if
// this reference carries the Task's UID.
func ownerRef(task *v1alpha1.Task) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "Task",
		Name:               task.Name,
		UID:                task.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// jobSpec: one attempt is one Job, so the Job never retries by itself
// (backoffLimit 0); retries are the operator's, with its own backoff.
// No ttlSecondsAfterFinished: the history limits decide when Jobs go.
func jobSpec(task *v1alpha1.Task, runID string, attempt int32, scheduled *time.Time, values map[string]string, opts Options) batchv1.JobSpec {
	replicas := replicas(task)
	spec := batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](0),
		// Indexed gives every replica a stable index (and hostname) and
		// makes the Job succeed only when every index succeeded.
		CompletionMode:   ptr.To(batchv1.IndexedCompletion),
		Completions:      ptr.To(replicas),
		Parallelism:      ptr.To(replicas),
		PodFailurePolicy: podFailurePolicy(task),
		Template:         podTemplate(task, runID, attempt, scheduled, values, opts),
	}
	if task.Spec.ActiveDeadlineSeconds != nil {
		// The operator stops the attempt at its deadline itself, once it
		// has kept what the pods printed (retry.Deadline); the Job's own
		// deadline, DeadlineBackstop later, only ends an attempt while no
		// operator runs.
		spec.ActiveDeadlineSeconds = ptr.To(*task.Spec.ActiveDeadlineSeconds + int64(DeadlineBackstop.Seconds()))
	}
	if KueueManaged(task) {
		// Kueue admits the Job by unsuspending it.
		spec.Suspend = ptr.To(true)
	}
	if MultiKueueDispatched(task) {
		// Kueue copies the Job to a worker cluster and mirrors its status
		// back; the manager's Job controller leaves this copy alone. The
		// field is immutable: it must be there from creation.
		spec.ManagedBy = ptr.To(v1alpha1.MultiKueueManagedBy)
	}
	return spec
}

// DeadlineBackstop is how much later than spec.activeDeadlineSeconds the
// Job's own activeDeadlineSeconds ends an attempt: only when the operator,
// which stops it at the deadline itself, is not running.
const DeadlineBackstop = time.Minute

// DefaultTerminationGracePeriodSeconds is the grace period of a Task's
// pods when spec.terminationGracePeriodSeconds is unset: the Kubernetes
// default.
const DefaultTerminationGracePeriodSeconds int64 = 30

// TerminationGracePeriod is the seconds a stopped attempt's pods have
// between SIGTERM and SIGKILL.
func TerminationGracePeriod(task *v1alpha1.Task) int64 {
	if g := task.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return DefaultTerminationGracePeriodSeconds
}

// KueueManaged reports whether the Task's Jobs are Kueue's to admit (the
// Task has the kueue.x-k8s.io/queue-name label).
func KueueManaged(task *v1alpha1.Task) bool {
	return task.Labels[v1alpha1.LabelKueueQueueName] != ""
}

// MultiKueueDispatched reports whether the Task's Jobs are dispatched to
// worker clusters through MultiKueue: labelled for Kueue and with
// batch.taskops.io/dispatch=multikueue (DispatchProblem refuses the label
// otherwise).
func MultiKueueDispatched(task *v1alpha1.Task) bool {
	return KueueManaged(task) && task.Labels[v1alpha1.LabelDispatch] == v1alpha1.DispatchMultiKueue
}

// DispatchProblem is what is wrong with a Task's dispatch label, or "": a
// value other than multikueue, or multikueue without the Kueue queue label
// (MultiKueue dispatches only what Kueue admits).
func DispatchProblem(task *v1alpha1.Task) string {
	v, ok := task.Labels[v1alpha1.LabelDispatch]
	switch {
	case !ok:
		return ""
	case v != v1alpha1.DispatchMultiKueue:
		return fmt.Sprintf("the label %s=%q: the only value is %q", v1alpha1.LabelDispatch, v, v1alpha1.DispatchMultiKueue)
	case !KueueManaged(task):
		return fmt.Sprintf("the label %s=%s needs the label %s naming a LocalQueue whose ClusterQueue dispatches through MultiKueue", v1alpha1.LabelDispatch, v, v1alpha1.LabelKueueQueueName)
	}
	return ""
}

// replicas is spec.replicas, with 0 (unset, on a Task that skipped
// defaulting) meaning the default 1.
func replicas(task *v1alpha1.Task) int32 {
	if task.Spec.Replicas < 1 {
		return 1
	}
	return task.Spec.Replicas
}

// podFailurePolicy decides what a failed pod means for the attempt. The
// first rule that matches decides:
//
//   - Ignore a disrupted pod (eviction, preemption): not the Task's fault,
//     so the Job replaces the pod and the disruption burns no attempt.
//   - FailJob on the exit codes after which retrying cannot help, when
//     there are any: the controller reads the attempt as NotRetryable.
//   - FailJob on any other exit code but 0 (the last rule, named by the
//     annotation AnnotationRetryableExitRule): with backoffLimit 0 such a
//     pod fails the Job anyway (BackoffLimitExceeded), but through a rule
//     the Job's Failed condition carries the exit code, which is how an
//     attempt's exit code is known when its pods are not here to read: a
//     MultiKueue worker ran them (its Job status is mirrored), or they
//     were deleted. The attempt is retried as any failed attempt.
func podFailurePolicy(task *v1alpha1.Task) *batchv1.PodFailurePolicy {
	rules := []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
			Type:   corev1.DisruptionTarget,
			Status: corev1.ConditionTrue,
		}},
	}}
	// Not retryable: the runner's 2 for an http Task ("bad request
	// definition"), spec.nonRetryableExitCodes for a shell Task (a shell
	// script's exit code 2 means nothing special).
	var codes []int32
	switch task.Spec.Type {
	case v1alpha1.TaskTypeHTTP:
		codes = []int32{runnerExitNotRetryable}
		if h := task.Spec.HTTP; h == nil || !h.RetryAllFailures {
			codes = append(codes, runnerExitClientError)
		}
	default:
		codes = sortedCodes(task.Spec.NonRetryableExitCodes)
	}
	if len(codes) > 0 {
		rules = append(rules, failJobOn(batchv1.PodFailurePolicyOnExitCodesOpIn, codes))
	}
	return &batchv1.PodFailurePolicy{Rules: append(rules, failJobOn(batchv1.PodFailurePolicyOnExitCodesOpNotIn, []int32{0}))}
}

// failJobOn is a rule that fails the Job when the task container's exit
// code is (In) or is not (NotIn) one of codes.
func failJobOn(op batchv1.PodFailurePolicyOnExitCodesOperator, codes []int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(ContainerName),
			Operator:      op,
			Values:        codes,
		},
	}
}

// sortedCodes is a sorted copy of exit codes: the Job API wants the
// values of an In rule ordered and unique.
func sortedCodes(codes []int32) []int32 {
	if len(codes) == 0 {
		return nil
	}
	out := slices.Clone(codes)
	slices.Sort(out)
	return slices.Compact(out)
}

// podTemplate is the pod every index of the attempt runs.
func podTemplate(task *v1alpha1.Task, runID string, attempt int32, scheduled *time.Time, values map[string]string, opts Options) corev1.PodTemplateSpec {
	c := container(task, values, opts)
	// The run context comes last: admission refuses these names in
	// spec.env, and later entries win anyway.
	c.Env = append(c.Env, runContextEnv(task, runID, attempt, scheduled)...)
	c.Env = append(c.Env, paramEnv(task, values)...)
	spec := corev1.PodSpec{
		// Required by podFailurePolicy; the operator, not the kubelet,
		// decides about retries.
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: task.Spec.ServiceAccountName,
		SecurityContext:    podSecurityContext(task.Spec.SecurityContext),
		Containers:         []corev1.Container{c},
		NodeSelector:       maps.Clone(task.Spec.NodeSelector),
		Affinity:           affinity(task.Spec.Affinity),
		PriorityClassName:  task.Spec.PriorityClassName,
		Volumes:            append(volumes(task.Spec.Volumes), resultsVolume(task)...),
		// The pause container is PID 1, not the task's process: a PID 1
		// ignores every signal it has no handler for, so `sh -c "sleep
		// 600"` would sit out the whole grace period after a stop. Not
		// PID 1, it ends at SIGTERM unless it traps it, and when the
		// container's main process ends the runtime kills what it left.
		ShareProcessNamespace:         ptr.To(true),
		TerminationGracePeriodSeconds: ptr.To(TerminationGracePeriod(task)),
	}
	spec.Tolerations = tolerations(task.Spec.Tolerations)
	for _, s := range task.Spec.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
	}
	if task.Spec.ServiceAccountName == "" {
		// A Task that names no ServiceAccount gets no API credentials: the
		// namespace's default ServiceAccount token is not its to use.
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      podLabels(task, runID, attempt),
			Annotations: podAnnotations(task),
		},
		Spec: spec,
	}
}

// podLabels are the user's spec.podMetadata.labels plus the operator's
// labels, which win: the controller and the Job's selector rely on them.
func podLabels(task *v1alpha1.Task, runID string, attempt int32) map[string]string {
	labels := map[string]string{}
	if pm := task.Spec.PodMetadata; pm != nil {
		for k, v := range pm.Labels {
			labels[k] = v
		}
	}
	for k, v := range jobLabels(task, runID, attempt) {
		labels[k] = v
	}
	return labels
}

// podAnnotations are the user's spec.podMetadata.annotations (copied, so the
// Job shares no map with the Task).
func podAnnotations(task *v1alpha1.Task) map[string]string {
	pm := task.Spec.PodMetadata
	if pm == nil || len(pm.Annotations) == 0 {
		return nil
	}
	annotations := make(map[string]string, len(pm.Annotations))
	for k, v := range pm.Annotations {
		annotations[k] = v
	}
	return annotations
}

// podSecurityContext meets the Pod Security Standard "restricted" for any
// image: a numeric non-root user and group (so root-by-default images start
// rather than being refused by runAsNonRoot) and the runtime's default
// seccomp profile.
func podSecurityContext(sc *v1alpha1.SecurityContext) *corev1.PodSecurityContext {
	out := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(DefaultRunAsID),
		RunAsGroup:     ptr.To(DefaultRunAsID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	// spec.securityContext overrides the ids; admission keeps them above 0.
	if sc != nil {
		if sc.RunAsUser != nil {
			out.RunAsUser = ptr.To(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			out.RunAsGroup = ptr.To(*sc.RunAsGroup)
		}
		if sc.FSGroup != nil {
			out.FSGroup = ptr.To(*sc.FSGroup)
		}
	}
	return out
}

// Run context variables every pod gets (JOB_COMPLETION_INDEX comes from the
// Job controller for Indexed Jobs).
const (
	EnvTaskName          = "TASK_NAME"
	EnvTaskNamespace     = "TASK_NAMESPACE"
	EnvTaskRunID         = "TASK_RUN_ID"
	EnvTaskAttempt       = "TASK_ATTEMPT"
	EnvTaskScheduledTime = "TASK_SCHEDULED_TIME"
)

// runContextEnv tells the pod which Task, run and attempt it is, and for a
// scheduled run its slot (RFC 3339, UTC).
func runContextEnv(task *v1alpha1.Task, runID string, attempt int32, scheduled *time.Time) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvTaskName, Value: task.Name},
		{Name: EnvTaskNamespace, Value: task.Namespace},
		{Name: EnvTaskRunID, Value: runID},
		{Name: EnvTaskAttempt, Value: strconv.FormatInt(int64(attempt), 10)},
	}
	if scheduled != nil {
		env = append(env, corev1.EnvVar{Name: EnvTaskScheduledTime, Value: scheduled.UTC().Format(time.RFC3339)})
	}
	return env
}

// volumeMounts converts spec.volumeMounts.
func volumeMounts(ms []v1alpha1.VolumeMount) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range ms {
		out = append(out, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly, SubPath: m.SubPath})
	}
	return out
}

// containerSecurityContext holds the "restricted" fields that only exist per
// container: no privilege escalation and no capabilities.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
	}
}

// container is the Task's only container; what it runs depends on the type.
func container(task *v1alpha1.Task, values map[string]string, opts Options) corev1.Container {
	c := corev1.Container{
		Name: ContainerName,
		// A script that dies without writing /dev/termination-log still
		// leaves the tail of its output for the status' lastError.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurityContext(),
		Resources:                resources(task),
		Env:                      userEnv(task),
		ImagePullPolicy:          task.Spec.ImagePullPolicy,
		VolumeMounts:             volumeMounts(task.Spec.VolumeMounts),
		WorkingDir:               task.Spec.WorkingDir,
	}
	switch task.Spec.Type {
	case v1alpha1.TaskTypeHTTP:
		c.Image = opts.RunnerImage
		c.Command = []string{runnerCommand}
		c.Args = []string{runnerHTTPArg}
		// After the user's env: the runner's variables are the operator's
		// (admission refuses TASK_HTTP_* in spec.env, and later entries win
		// anyway).
		c.Env = append(c.Env, httpEnv(task, values)...)
	default:
		c.Image = task.Spec.Image
		if c.Image == "" {
			c.Image = opts.ShellImage
		}
		c.Command = []string{"/bin/sh", "-c", literal(task.Spec.Shell)}
		if len(task.Spec.Results) > 0 {
			// The script runs under the results wrapper, which writes
			// the files it leaves into the termination message; it is an
			// argument of the wrapper, never part of its text.
			c.Command = []string{"/bin/sh", "-c", literal(results.Wrapper), "task-results", literal(task.Spec.Shell)}
			for _, r := range task.Spec.Results {
				c.Command = append(c.Command, r.Name)
			}
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: resultsVolumeName, MountPath: results.Dir})
			c.Env = append(c.Env, corev1.EnvVar{Name: results.DirEnv, Value: results.Dir})
		}
	}
	return c
}

// resultsVolumeName is the emptyDir a shell Task with results writes them
// into (results.Dir).
const resultsVolumeName = "task-results"

// resultsVolume is that emptyDir, for a shell Task that declares results;
// an emptyDir is allowed by the restricted Pod Security Standard.
func resultsVolume(task *v1alpha1.Task) []corev1.Volume {
	if len(task.Spec.Results) == 0 || task.Spec.Type == v1alpha1.TaskTypeHTTP {
		return nil
	}
	limit := resource.MustParse("1Mi")
	return []corev1.Volume{{Name: resultsVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
}

// paramEnv gives every declared param of the run its TASK_PARAM_<NAME>
// variable. The value is literal: the kubelet expands no $(VAR) in it and
// no shell ever sees it as text.
func paramEnv(task *v1alpha1.Task, values map[string]string) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, p := range task.Spec.Params {
		if v, ok := values[p.Name]; ok {
			env = append(env, corev1.EnvVar{Name: params.EnvName(p.Name), Value: literal(v)})
		}
	}
	return env
}

// literal protects a string the operator puts into a container's command or
// env from the kubelet's $(VAR) expansion, which would otherwise replace
// $(NAME) with the value of a variable NAME and turn every "$$" into "$"
// (e.g. the shell's PID in `echo $$`). The kubelet turns "$$" back into "$",
// so the process sees exactly the user's text.
func literal(s string) string {
	return strings.ReplaceAll(s, "$", "$$")
}

// resources copies spec.resources into the container's requirements.
func resources(task *v1alpha1.Task) corev1.ResourceRequirements {
	r := task.Spec.Resources
	if r == nil {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{
		Limits:   r.Limits.DeepCopy(),
		Requests: r.Requests.DeepCopy(),
	}
}

// userEnv converts spec.env to the container's env. Values keep the usual
// Kubernetes $(VAR) semantics, as in any pod's env.
func userEnv(task *v1alpha1.Task) []corev1.EnvVar {
	if len(task.Spec.Env) == 0 {
		return nil
	}
	env := make([]corev1.EnvVar, 0, len(task.Spec.Env))
	for _, e := range task.Spec.Env {
		v := corev1.EnvVar{Name: e.Name, ValueFrom: envVarSource(e.ValueFrom)}
		if e.Value != nil {
			v.Value = *e.Value
		}
		env = append(env, v)
	}
	return env
}

// envVarSource converts a spec.env valueFrom; nil stays nil.
func envVarSource(src *v1alpha1.EnvVarSource) *corev1.EnvVarSource {
	if src == nil {
		return nil
	}
	out := &corev1.EnvVarSource{}
	switch {
	case src.SecretKeyRef != nil:
		out.SecretKeyRef = secretKeySelector(*src.SecretKeyRef)
	case src.ConfigMapKeyRef != nil:
		out.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: src.ConfigMapKeyRef.Name},
			Key:                  src.ConfigMapKeyRef.Key,
			Optional:             copyBool(src.ConfigMapKeyRef.Optional),
		}
	case src.FieldRef != nil:
		out.FieldRef = &corev1.ObjectFieldSelector{FieldPath: src.FieldRef.FieldPath}
	default:
		// Admission requires exactly one source; an empty one would make
		// the Job invalid, so treat it as no source (an empty value).
		return nil
	}
	return out
}

// secretKeySelector points the kubelet at a Secret key; the operator itself
// never reads the value.
func secretKeySelector(ref v1alpha1.KeySelector) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
		Key:                  ref.Key,
		Optional:             copyBool(ref.Optional),
	}
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	return ptr.To(*b)
}

// httpEnv is the request of an http Task as the runner's environment, with
// the contract's defaults applied (spec.http may be nil).
func httpEnv(task *v1alpha1.Task, values map[string]string) []corev1.EnvVar {
	h := task.Spec.HTTP
	if h == nil {
		h = &v1alpha1.HTTPSpec{}
	}

	method := string(h.Method)
	if method == "" {
		method = defaultHTTPMethod
	}
	timeout := h.TimeoutSeconds
	if timeout <= 0 {
		timeout = defaultHTTPTimeoutSeconds
	}

	env := []corev1.EnvVar{
		{Name: EnvHTTPURL, Value: literal(params.Substitute(task.Spec.URL, values, params.InURL))},
		{Name: EnvHTTPMethod, Value: method},
	}
	if h.Body != "" {
		env = append(env, corev1.EnvVar{Name: EnvHTTPBody, Value: literal(params.Substitute(h.Body, values, params.Verbatim))})
	}
	if len(h.SuccessCodes) > 0 {
		// Omitted means any 2xx to the runner.
		env = append(env, corev1.EnvVar{Name: EnvHTTPSuccessCodes, Value: joinCodes(h.SuccessCodes)})
	}
	env = append(env, corev1.EnvVar{Name: EnvHTTPTimeoutSeconds, Value: strconv.FormatInt(int64(timeout), 10)})
	env = append(env, headerEnvWith(EnvHTTPHeaderPrefix, h.Headers, values)...)
	for i, r := range h.Results {
		prefix := EnvHTTPResultPrefix + strconv.Itoa(i) + "_"
		env = append(env, corev1.EnvVar{Name: prefix + "NAME", Value: r.Name}, corev1.EnvVar{Name: prefix + "FROM", Value: literal(r.From)})
	}
	return env
}

// headerEnvWith numbers the headers in order (the runner sends them in
// that order) as the variables <start><i>_NAME, _VALUE and _SENSITIVE. A
// Secret-backed value is a secretKeyRef the kubelet resolves, and is
// flagged SENSITIVE so the runner masks it in everything it prints; a
// literal value gets the run's params substituted (values nil: none).
func headerEnvWith(start string, headers []v1alpha1.HTTPHeader, values map[string]string) []corev1.EnvVar {
	var env []corev1.EnvVar
	for i, h := range headers {
		prefix := start + strconv.Itoa(i) + "_"
		value := corev1.EnvVar{Name: prefix + "VALUE"}
		sensitive := false
		switch {
		case h.ValueFrom != nil:
			value.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: secretKeySelector(h.ValueFrom.SecretKeyRef)}
			sensitive = true
		case h.Value != nil:
			value.Value = literal(params.Substitute(*h.Value, values, params.Verbatim))
		}
		env = append(env, corev1.EnvVar{Name: prefix + "NAME", Value: h.Name}, value)
		if sensitive {
			env = append(env, corev1.EnvVar{Name: prefix + "SENSITIVE", Value: "true"})
		}
	}
	return env
}

// joinCodes renders success codes as the runner's comma-separated list.
func joinCodes(codes []int32) string {
	s := make([]string, len(codes))
	for i, c := range codes {
		s[i] = strconv.FormatInt(int64(c), 10)
	}
	return strings.Join(s, ",")
}
