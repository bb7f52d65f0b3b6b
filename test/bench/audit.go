package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
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
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// actor names who made a request, for the write tables.
type actor string

const (
	actorOperator actor = "operator"
	actorCronJob  actor = "cronjob-controller"
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
	}
	return actorOther
}

var auditWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// conflictPrefix marks, in auditCounts, the writes refused with 409 Conflict.
const conflictPrefix = "409:"

// auditCounts counts write requests received in [from, to) by actor and
// resource key (see resKey).
type auditCounts map[actor]map[string]float64

func countAudit(r io.Reader, from, to time.Time) (auditCounts, error) {
	out := auditCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line cut by a rotation or a crash: skip it
		}
		if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		if !auditWriteVerbs[e.Verb] || e.ObjectRef == nil {
			continue
		}
		if e.RequestReceived.Before(from) || !e.RequestReceived.Before(to) {
			continue
		}
		a := actorOf(&e)
		if out[a] == nil {
			out[a] = map[string]float64{}
		}
		k := resKey(e.ObjectRef.Resource, e.ObjectRef.Subresource)
		out[a][k]++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 409 {
			out[a][conflictPrefix+k]++
		}
	}
	return out, sc.Err()
}

func countAuditFile(path string, from, to time.Time) (auditCounts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return countAudit(f, from, to)
}
