package main

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/taskops/task-operator/test/harness"
)

// The API server's audit log, when the local cluster writes one (see the
// README: hack/local-cluster.sh with LOCAL_CLUSTER_AUDIT_POLICY set to
// hack/bench-audit-policy.yaml logs every write at level Metadata to
// DIR/logs/audit.log). It attributes each write exactly, to the operator by
// its user agent and to the CronJob controller by its service account.

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// actor names who made a request, for the write tables.
type actor string

const (
	actorOperator actor = "operator"
	actorCronJob  actor = "cronjob-controller"
	actorOracle   actor = "oracle"
	actorOther    actor = "other"
)

// operatorUserAgentPrefix: client-go's default user agent starts with the
// binary's name, and the benchmark runs the operator as "manager".
const operatorUserAgentPrefix = "manager/"

// cronJobControllerUser is the CronJob controller's identity: the
// controller-manager runs with --use-service-account-credentials.
const cronJobControllerUser = "system:serviceaccount:kube-system:cronjob-controller"

func actorOf(e *auditEvent) actor {
	switch {
	case strings.HasPrefix(e.UserAgent, operatorUserAgentPrefix):
		return actorOperator
	case e.User.Username == cronJobControllerUser:
		return actorCronJob
	case strings.HasPrefix(e.UserAgent, oracleUserAgent):
		return actorOracle
	}
	return actorOther
}

var auditWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// auditReadVerbs are the reads the audit policy logs (watches are not:
// an informer opens one per resource and keeps it).
var auditReadVerbs = map[string]bool{"get": true, "list": true}

// conflictPrefix marks, in auditCounts, the writes refused with 409
// Conflict; readPrefix the reads.
const (
	conflictPrefix = "409:"
	readPrefix     = "read:"
)

// auditCounts counts write requests received in [from, to) by actor and
// resource key (harness.ResourceKey), and the reads under readPrefix.
type auditCounts map[actor]map[string]float64

func countAudit(r io.Reader, from, to time.Time) (auditCounts, error) {
	out := auditCounts{}
	err := eachAuditEvent(r, func(e *auditEvent) {
		if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			return
		}
		read := auditReadVerbs[e.Verb]
		if (!auditWriteVerbs[e.Verb] && !read) || !e.receivedIn(from, to) {
			return
		}
		a := actorOf(e)
		if out[a] == nil {
			out[a] = map[string]float64{}
		}
		k := harness.ResourceKey(e.ObjectRef.Resource, e.ObjectRef.Subresource)
		if read {
			out[a][readPrefix+k]++
			return
		}
		out[a][k]++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 409 {
			out[a][conflictPrefix+k]++
		}
	})
	return out, err
}

func countAuditFile(path string, from, to time.Time) (out auditCounts, err error) {
	return out, readAuditFile(path, func(r io.Reader) error {
		out, err = countAudit(r, from, to)
		return err
	})
}

// operatorWritesByTask counts the operator's writes received in
// [from, to) in namespace by the Task they were for: the Task's own
// requests (tasks, tasks/status) by its name, a Job's by taskOfJob. Events
// and leases are not counted, nor the objects of other Tasks.
func operatorWritesByTask(r io.Reader, namespace string, taskOfJob map[string]string, from, to time.Time) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachAuditEvent(r, func(e *auditEvent) {
		if !e.completedWrite(from, to) || e.ObjectRef.Namespace != namespace || actorOf(e) != actorOperator {
			return
		}
		switch e.ObjectRef.Resource {
		case "tasks":
			out[e.ObjectRef.Name]++
		case "jobs":
			if t, ok := taskOfJob[e.ObjectRef.Name]; ok {
				out[t]++
			}
		}
	})
	return out, err
}

func operatorWritesByTaskFile(path, namespace string, taskOfJob map[string]string, from, to time.Time) (out map[string]float64, err error) {
	return out, readAuditFile(path, func(r io.Reader) error {
		out, err = operatorWritesByTask(r, namespace, taskOfJob, from, to)
		return err
	})
}

// eachAuditEvent calls fn with every event of the log; a line that does
// not parse (cut by a crash) is skipped.
func eachAuditEvent(r io.Reader, fn func(e *auditEvent)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		fn(&e)
	}
	return sc.Err()
}

// readAuditFile hands the log at path to read.
func readAuditFile(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f)
}

// receivedIn: a request about an object, received in [from, to).
func (e *auditEvent) receivedIn(from, to time.Time) bool {
	return e.ObjectRef != nil && !e.RequestReceived.Before(from) && e.RequestReceived.Before(to)
}

// jobCreateIn: a Job create in namespace (ObjectRef set).
func (e *auditEvent) jobCreateIn(namespace string) bool {
	return e.Verb == "create" && e.ObjectRef.Resource == "jobs" && e.ObjectRef.Subresource == "" && e.ObjectRef.Namespace == namespace
}

// completedWrite: a write's response, the request received in [from, to).
func (e *auditEvent) completedWrite(from, to time.Time) bool {
	return e.Stage == "ResponseComplete" && auditWriteVerbs[e.Verb] && e.receivedIn(from, to)
}

// createCost is what the API server spent on a run of Job creates, from
// the audit log: why the same creates take longer when real Jobs are
// created (the operator's) than in B0 (Jobs nothing reacts to).
type createCost struct {
	// serverMS is the mean time from a create's arrival to its response
	// (ms): the API server's and etcd's own work, including waiting for a
	// CPU on a shared machine.
	serverMS float64
	// reacting counts, per create, the writes that the Job controller,
	// the scheduler and kwok made in the same window: pods, bindings, pod
	// and Job status, their events. In B0 none react.
	reacting float64
	// known is false without an audit log or a create in the window.
	known bool
}

// ms and react are the figures, NaN when not known.
func (c createCost) ms() float64    { return c.or(c.serverMS) }
func (c createCost) react() float64 { return c.or(c.reacting) }
func (c createCost) or(x float64) float64 {
	if !c.known {
		return math.NaN()
	}
	return x
}

// reactingAgents are the user agents of the components that act on a new
// Job; the benchmark's own client, the operator and the API server are
// not among them.
var reactingAgents = []string{"kube-controller-manager/", "kube-scheduler/", kwokUserAgentPrefix}

// jobCreateCost reads the Job creates in namespace received in [from, to)
// and the reacting writes received in the same window; not known when
// there is no audit log (path "") or the window holds no create.
func jobCreateCost(path, namespace string, from, to time.Time) (c createCost, err error) {
	if path == "" {
		return createCost{}, nil
	}
	return c, readAuditFile(path, func(r io.Reader) error {
		c, err = jobCreateCostIn(r, namespace, from, to)
		return err
	})
}

func jobCreateCostIn(r io.Reader, namespace string, from, to time.Time) (createCost, error) {
	var creates, reacting int
	var server time.Duration
	err := eachAuditEvent(r, func(e *auditEvent) {
		if !e.completedWrite(from, to) {
			return
		}
		switch {
		case e.jobCreateIn(namespace):
			creates++
			server += e.StageTimestamp.Sub(e.RequestReceived)
		case slices.ContainsFunc(reactingAgents, func(p string) bool { return strings.HasPrefix(e.UserAgent, p) }):
			reacting++
		}
	})
	if err != nil || creates == 0 {
		return createCost{}, err
	}
	return createCost{
		serverMS: server.Seconds() * 1000 / float64(creates),
		reacting: float64(reacting) / float64(creates),
		known:    true,
	}, nil
}

// nthCreateDone is when the API server answered the n-th Job create in
// namespace ns received from start on by a user agent starting with agent
// (the audit log's stageTimestamp); ok is false when the log has fewer.
func nthCreateDone(path, ns, agent string, start time.Time, n int) (time.Time, bool, error) {
	var done []time.Time
	err := readAuditFile(path, func(r io.Reader) error {
		return eachAuditEvent(r, func(e *auditEvent) {
			if e.Stage != "ResponseComplete" || e.ObjectRef == nil || !e.jobCreateIn(ns) ||
				!strings.HasPrefix(e.UserAgent, agent) || e.RequestReceived.Before(start) ||
				e.ResponseStatus == nil || e.ResponseStatus.Code != 201 {
				return
			}
			done = append(done, e.StageTimestamp)
		})
	})
	if err != nil || len(done) < n {
		return time.Time{}, false, err
	}
	slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
	return done[n-1], true, nil
}
