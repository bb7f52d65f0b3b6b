package runs

import (
	"regexp"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// How a failed Job's conditions read as an attempt's failure: its reason
// and, where the Job controller wrote it, the exit code. An attempt Job's
// pod failure policy (jobs.podFailurePolicy) ends it through a FailJob
// rule for any exit code but 0, so its Failed condition says which code
// and which rule; this is all there is to read of an attempt whose pods
// ran on a MultiKueue worker (the condition is mirrored) or are gone.

// failJobMessage is the Job controller's message of a Failed (and
// FailureTarget) condition with reason PodFailurePolicy: "Container task
// for pod NS/NAME failed with exit code 3 matching FailJob rule at index 2".
// Kubernetes offers the exit code nowhere else in the Job.
var failJobMessage = regexp.MustCompile(`failed with exit code (\d+) matching FailJob rule at index (\d+)`)

// failure maps the Job controller's Failed (or FailureTarget) condition of
// job to an attempt's failure reason, and the exit code that failed it
// when the condition names one. With backoffLimit 0 any failed pod fails
// the Job; a FailJob rule is retryable (PodFailed) when it is the rule the
// Job's annotation names, and NotRetryable otherwise.
func failure(job *batchv1.Job, c *batchv1.JobCondition) (v1alpha1.Reason, *int32) {
	switch c.Reason {
	case batchv1.JobReasonDeadlineExceeded:
		return v1alpha1.AttemptDeadlineExceeded, nil
	case batchv1.JobReasonBackoffLimitExceeded:
		return v1alpha1.AttemptPodFailed, nil
	case batchv1.JobReasonPodFailurePolicy:
		retryable, known := job.Annotations[v1alpha1.AnnotationRetryableExitRule]
		m := failJobMessage.FindStringSubmatch(c.Message)
		if m == nil {
			// A message of another form (another Kubernetes version): the
			// rule is unknown. On a Job with a retryable rule, retry (at
			// worst maxRetry attempts too many); before that rule existed,
			// every FailJob was the not-retryable one.
			if known || !strings.Contains(c.Message, "FailJob") {
				return v1alpha1.AttemptPodFailed, nil
			}
			return v1alpha1.AttemptNotRetryable, nil
		}
		code, err := strconv.ParseInt(m[1], 10, 32)
		var exit *int32
		if err == nil {
			exit = new(int32(code))
		}
		if known && retryable == m[2] {
			return v1alpha1.AttemptPodFailed, exit
		}
		return v1alpha1.AttemptNotRetryable, exit
	}
	return v1alpha1.AttemptJobFailed, nil
}
