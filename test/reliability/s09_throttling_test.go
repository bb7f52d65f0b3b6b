//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/test/harness"
)

const throttleName = "reliability-throttle-operator"

// throttle puts the operator's requests (its ServiceAccount; everything but
// leases, whose API group the FlowSchema leaves out) into a priority level
// with the given concurrency shares, lending and borrowing nothing, and
// queuing off: what does not fit is refused with 429.
func throttle(t *testing.T, shares int32) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	plc := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: throttleName}}
	spec := flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
		NominalConcurrencyShares: ptr.To(shares), LendablePercent: ptr.To[int32](0), BorrowingLimitPercent: ptr.To[int32](0),
		LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
	}}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(plc), plc); apierrors.IsNotFound(err) {
		plc.Spec = spec
		if err := s.c.Create(ctx, plc); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	} else {
		plc.Spec = spec
		if err := s.c.Update(ctx, plc); err != nil {
			t.Fatal(err)
		}
	}
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: throttleName}}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(fs), fs); err == nil {
		return
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	fs.Spec = flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: throttleName},
		MatchingPrecedence:         50,
		DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
				ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: operatorNamespace, Name: serviceAccount}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: []string{"*"}, APIGroups: []string{"", "batch", "batch.taskops.io", "events.k8s.io"}, Resources: []string{"*"},
				ClusterScope: true, Namespaces: []string{"*"},
			}},
		}},
	}
	if err := s.c.Create(ctx, fs); err != nil {
		t.Fatal(err)
	}
}

func unthrottle(ctx context.Context) {
	_ = s.c.Delete(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: throttleName}})
	_ = s.c.Delete(ctx, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: throttleName}})
}

// Scenario 9, throttling: an API Priority and Fairness FlowSchema matches
// the operator's ServiceAccount (leases excepted) and sends it to a
// priority level that refuses what does not fit, first with no concurrency
// at all (every request refused with 429), then with a tiny share. New
// Tasks arrive meanwhile. The operator (with leader election) must stay up:
// no exit, /healthz answering (so a kubelet would not restart it), its
// lease kept; once the limit is lifted it converges and the invariants
// hold.
func TestS09Throttling(t *testing.T) {
	slowScenario(t)
	n0, n1 := pick(30, 10), pick(60, 20)
	hard, tiny := pick(45*time.Second, 20*time.Second), pick(45*time.Second, 20*time.Second)
	ns := s.newNamespace(t, "rel-throttle", false)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		unthrottle(ctx)
	})
	ctx := ctxFor(t, 20*time.Second)
	if err := s.c.Delete(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: leaseName}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	op := s.startOperator(t, "op", true, "--leader-elect", "--leader-election-namespace="+operatorNamespace)
	harness.Eventually(t, 60*time.Second, "the operator to lead", note(op), func(context.Context) (bool, string) {
		return leads(op, 0), "not yet"
	})
	holder, _ := leaseHolder(ctx)
	jobs := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)
	want := map[string]oneShotWant{}
	createAll(t, failoverTasks(ns, "before", n0, want))
	time.Sleep(2 * time.Second)

	// Watch the operator's liveness probe and lease while throttled.
	var mu sync.Mutex
	healthFails, healthChecks := 0, 0
	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		hc := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stopProbe:
				return
			case <-time.After(time.Second):
			}
			resp, err := hc.Get(op.ProbeURL("healthz"))
			mu.Lock()
			healthChecks++
			if err != nil || resp.StatusCode != http.StatusOK {
				healthFails++
			}
			mu.Unlock()
			if err == nil {
				resp.Body.Close()
			}
		}
	}()

	c0, err := operatorRequests(op.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	throttle(t, 0)
	throttledAt := time.Now()
	createAll(t, failoverTasks(ns, "during", n1, want))
	time.Sleep(hard)
	c1, _ := operatorRequests(op.MetricsURL())
	throttle(t, 1)
	time.Sleep(tiny)
	c2, _ := operatorRequests(op.MetricsURL())
	var lease coordv1.Lease
	_ = s.c.Get(ctxFor(t, 10*time.Second), client.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, &lease)
	unthrottle(ctxFor(t, 30*time.Second))
	progress, _ := listTasks(ctxFor(t, 10*time.Second), ns)
	close(stopProbe)
	<-probeDone

	hardD, tinyD := c1.minus(c0), c2.minus(c1)
	if hardD.byCode["429"] == 0 {
		t.Errorf("no request of the operator was refused with 429 while its priority level had no concurrency: the FlowSchema did not match (requests %s)", fmtCounts(hardD.byCode))
	}
	if !op.Alive() || op.Starts() != 1 {
		t.Fatalf("the operator did not stay up: alive %v, started %d times, exit %v", op.Alive(), op.Starts(), op.ExitErr())
	}
	renewedDuring := lease.Spec.RenewTime != nil && lease.Spec.RenewTime.Time.After(throttledAt.Add(hard))
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != holder || !renewedDuring {
		t.Errorf("the lease: holder %v (was %s), renewed %v; want it kept and renewed while throttled", ptr.Deref(lease.Spec.HolderIdentity, ""), holder, lease.Spec.RenewTime)
	}
	mu.Lock()
	hf, hcount := healthFails, healthChecks
	mu.Unlock()
	if hf > 0 {
		t.Errorf("/healthz failed %d of %d times while throttled: a kubelet would restart the operator", hf, hcount)
	}
	converged := waitFinished(t, ns, n0+n1, pick(10*time.Minute, 5*time.Minute), op)
	seen := jobs.All(t)
	checkOneShots(t, ns, seen, want)
	events := checkMonitor(t, mon)
	rate := func(c clientCounts) string {
		if c.requests == 0 {
			return "no requests"
		}
		return fmt.Sprintf("%.0f requests (%s; codes %s), %.0f refused with 429 (%.0f%%)", c.requests, fmtCounts(c.byMethod), fmtCounts(c.byCode), c.byCode["429"], 100*c.byCode["429"]/c.requests)
	}
	figure(t, "%d+%d Tasks; operator's requests (leases excepted) throttled by APF: %s with 0 concurrency shares: %s; %s with 1 share: %s; at the lift %d of %d Tasks had finished (%s); the operator stayed up (1 start, /healthz ok %d/%d, lease kept and renewed), all Tasks finished %s after the lift; %d Jobs, %d duplicates, %d Task versions watched, %d steps backwards",
		n0, n1, harness.Secs(hard), rate(hardD), harness.Secs(tiny), rate(tinyD), countFinished(progress), n0+n1, phaseCounts(progress), hcount-hf, hcount,
		harness.Secs(converged), len(seen), len(harness.Duplicates(seen)), events, len(mon.Problems()))
}
