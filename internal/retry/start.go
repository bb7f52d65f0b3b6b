package retry

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodStart is what the start timeout needs to know of one pod of an attempt.
type PodStart struct {
	Name    string
	Created time.Time
	// Scheduled is when the pod got a node (its PodScheduled condition);
	// zero while it has none. Time spent waiting for a node is waiting for
	// capacity, not being broken: the start timeout counts from the later
	// of Created and Scheduled (Since).
	Scheduled time.Time
	// Started is true once the pod is Running or has terminated.
	Started bool
	// WaitingReason is a container's waiting reason (ImagePullBackOff,
	// CreateContainerConfigError, ...) or "Unschedulable".
	WaitingReason string
	// WaitingMessage is the detail that goes with WaitingReason.
	WaitingMessage string
	// Warning is the pod's newest Warning event ("ErrImagePull: ...",
	// "FailedMount: ..."), read only when the pod is overdue and its
	// containers say nothing yet: under load the kubelet records the event
	// before it puts a waiting reason in the container status.
	Warning string
	// Phase is the pod's phase, the cause of last resort.
	Phase corev1.PodPhase
}

// Cause is the best account of why the pod has not started: the
// container's waiting reason, else its newest Warning event, else its
// phase.
func (p PodStart) Cause() string {
	switch {
	case p.WaitingReason != "" && p.WaitingMessage != "":
		return p.WaitingReason + ": " + p.WaitingMessage
	case p.WaitingReason != "":
		return p.WaitingReason
	case p.Warning != "":
		return p.Warning
	case p.Phase != "":
		return string(p.Phase)
	}
	return string(corev1.PodPending)
}

// Since is when the pod's start timeout began: its creation, or when it
// got a node if it waited for one.
func (p PodStart) Since() time.Time {
	if p.Scheduled.After(p.Created) {
		return p.Scheduled
	}
	return p.Created
}

// Overdue reports whether the start timeout has passed for a pod that
// has not started and is not waiting for a node: the start check will
// call it stuck, so the observer reads its events for the best cause.
func (p PodStart) Overdue(timeout time.Duration, now time.Time) bool {
	return !p.Started && p.WaitingReason != corev1.PodReasonUnschedulable && !now.Before(p.Since().Add(timeout))
}

// StartCheck is the verdict of the start timeout on an active attempt.
type StartCheck struct {
	// Stuck is true when a pod has not started within the timeout: the
	// attempt must be stopped and fails with StartTimeout.
	Stuck   bool
	Message string
	// Waiting is true when the pods that have not started wait for
	// capacity (Unschedulable) rather than being broken: the attempt keeps
	// waiting, visibly, and Cause says for what. Not a failure: only
	// spec.capacityTimeoutSeconds bounds it.
	Waiting bool
	Cause   string
	// RecheckAt is when to look again (zero when every pod started).
	RecheckAt time.Time
}

// StartCheckDue reports whether the pods of an attempt created at jobCreated
// may need a look: none can be stuck before the timeout has passed since
// the Job itself was created.
func StartCheckDue(jobCreated time.Time, timeout time.Duration, now time.Time) bool {
	return !now.Before(jobCreated.Add(timeout))
}

// CheckStart applies the start timeout to an active attempt: it is stuck
// when one of its pods is neither Running nor terminated timeout after the
// pod was created (or, if it waited for a node, after it got one), or when the Job still has no pod at all timeout after
// it was created (a missing ServiceAccount keeps pods from being created).
// A Job whose pods a used-up ResourceQuota refuses (refused, Capacity)
// waits for capacity instead, and is looked at again a timeout later.
func CheckStart(jobCreated time.Time, pods []PodStart, refused *Refusal, timeout time.Duration, now time.Time) StartCheck {
	if len(pods) == 0 {
		deadline := jobCreated.Add(timeout)
		switch {
		case now.Before(deadline):
			return StartCheck{RecheckAt: deadline}
		case refused != nil && refused.Capacity:
			return StartCheck{Waiting: true, Cause: "no pod could be created: " + refused.Message, RecheckAt: now.Add(timeout)}
		case refused != nil:
			return StartCheck{Stuck: true, Message: fmt.Sprintf("no pod was created within %s: %s (fix what refused the pod, then run the Task again)", timeout, refused.Message)}
		}
		return StartCheck{Stuck: true, Message: fmt.Sprintf("no pod was created within %s; the Job's events say why (kubectl describe job): a missing ServiceAccount, an admission policy or webhook refusing pods, or no Job controller running", timeout)}
	}
	var recheck time.Time
	var waiting []string
	for _, p := range pods {
		if p.Started {
			continue
		}
		deadline := p.Since().Add(timeout)
		if p.WaitingReason == corev1.PodReasonUnschedulable {
			// Waiting for a node, not broken: look again a timeout later
			// (a pod that gets a node may then turn out broken).
			cause := "pod " + p.Name + " is Unschedulable"
			if p.WaitingMessage != "" {
				cause += ": " + p.WaitingMessage
			}
			waiting = append(waiting, cause)
			deadline = now.Add(timeout)
		} else if !now.Before(deadline) {
			return StartCheck{Stuck: true, Message: fmt.Sprintf("pod %s did not start within %s: %s (kubectl describe pod %s)", p.Name, timeout, p.Cause(), p.Name)}
		}
		if recheck.IsZero() || deadline.Before(recheck) {
			recheck = deadline
		}
	}
	if len(waiting) > 0 {
		return StartCheck{Waiting: true, Cause: waiting[0], RecheckAt: recheck}
	}
	return StartCheck{RecheckAt: recheck}
}

// RemotePods is what the Job status a worker cluster mirrors back says of
// an attempt's pods (MultiKueue): counts only, no pod to read.
type RemotePods struct {
	Cluster string // the worker cluster, when known (the Workload's status.clusterName)
	Active  int32
	Ready   int32
}

// CheckRemoteStart applies the start timeout to an attempt whose pods run
// on a worker cluster: the manager sees only the mirrored counts, so it is
// stuck when not every pod is ready or finished (the caller checked that)
// timeout after the worker started the Job (since, its mirrored
// startTime). The message says what the manager saw and where to look:
// the pods' own reasons are on the worker.
func CheckRemoteStart(since time.Time, pods RemotePods, timeout time.Duration, now time.Time) StartCheck {
	deadline := since.Add(timeout)
	if now.Before(deadline) {
		return StartCheck{RecheckAt: deadline}
	}
	where := "the worker cluster"
	if pods.Cluster != "" {
		where = "worker cluster " + pods.Cluster
	}
	return StartCheck{Stuck: true, Message: fmt.Sprintf(
		"the pods did not all start within %s on %s (%d active, %d ready, as mirrored): their reasons are on the worker", timeout, where, pods.Active, pods.Ready)}
}
