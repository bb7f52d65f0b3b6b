package leader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

const me = "replica-a"

// fakeLock is a resourcelock.Interface whose writes succeed or fail as
// told, and which advances the clock while a request is "on the wire".
type fakeLock struct {
	clock   *clocktesting.FakePassiveClock
	latency time.Duration
	fail    error
	calls   []string
}

func (f *fakeLock) call(name string) error {
	f.calls = append(f.calls, name)
	f.clock.SetTime(f.clock.Now().Add(f.latency))
	return f.fail
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	err := f.call("get")
	if err != nil {
		return nil, nil, err
	}
	return &resourcelock.LeaderElectionRecord{HolderIdentity: me}, []byte("{}"), nil
}

func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return f.call("create")
}

func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return f.call("update")
}

func (f *fakeLock) RecordEvent(e string)       { f.calls = append(f.calls, "event "+e) }
func (f *fakeLock) Identity() string           { return me }
func (f *fakeLock) Describe() string           { return "test/lease" }
func (f *fakeLock) String() string             { return strings.Join(f.calls, ",") }
func (f *fakeLock) setFail(err error)          { f.fail = err }
func (f *fakeLock) setLatency(d time.Duration) { f.latency = d }

var errRefused = errors.New("409 Conflict")

// step is one thing that happens to the lock, in order.
type step func(t *testing.T, l *Lock, f *fakeLock)

func renew(t *testing.T, l *Lock, _ *fakeLock) {
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: me}); err != nil {
		t.Fatalf("renewal: %v", err)
	}
}

func create(t *testing.T, l *Lock, _ *fakeLock) {
	if err := l.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: me}); err != nil {
		t.Fatalf("create: %v", err)
	}
}

func failedRenew(t *testing.T, l *Lock, f *fakeLock) {
	f.setFail(errRefused)
	defer f.setFail(nil)
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: me}); !errors.Is(err, errRefused) {
		t.Fatalf("a failed renewal returned %v, want the inner lock's error", err)
	}
}

func failedCreate(t *testing.T, l *Lock, f *fakeLock) {
	f.setFail(errRefused)
	defer f.setFail(nil)
	if err := l.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: me}); !errors.Is(err, errRefused) {
		t.Fatalf("a failed create returned %v, want the inner lock's error", err)
	}
}

func get(t *testing.T, l *Lock, _ *fakeLock) {
	if _, _, err := l.Get(context.Background()); err != nil {
		t.Fatalf("get: %v", err)
	}
}

func release(t *testing.T, l *Lock, _ *fakeLock) {
	// client-go's tryRelease writes an empty holder.
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func failedRelease(t *testing.T, l *Lock, f *fakeLock) {
	f.setFail(errRefused)
	defer f.setFail(nil)
	_ = l.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1})
}

func writeForOther(t *testing.T, l *Lock, _ *fakeLock) {
	if err := l.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-b"}); err != nil {
		t.Fatal(err)
	}
}

func wait(d time.Duration) step {
	return func(_ *testing.T, _ *Lock, f *fakeLock) { f.clock.SetTime(f.clock.Now().Add(d)) }
}

func latency(d time.Duration) step {
	return func(_ *testing.T, _ *Lock, f *fakeLock) { f.setLatency(d) }
}

func TestHeld(t *testing.T) {
	const validity = RenewDeadline
	cases := []struct {
		name  string
		steps []step
		want  bool
	}{
		{"a lock never renewed is not held", nil, false},
		{"a lock that was only read is not held", []step{get}, false},
		{"a lock renewed just now is held", []step{renew}, true},
		{"a lock created just now is held", []step{create}, true},
		{"a renewal just younger than the deadline still holds", []step{renew, wait(validity - time.Millisecond)}, true},
		{"a renewal exactly as old as the deadline no longer holds", []step{renew, wait(validity)}, false},
		{"a renewal older than the deadline no longer holds", []step{renew, wait(validity + 5*time.Second)}, false},
		{"a renewal counts from when it was sent, not from its answer", []step{latency(4 * time.Second), renew, latency(0), wait(validity - 4*time.Second)}, false},
		{"a slow renewal answered within the deadline holds until sent time plus the deadline", []step{latency(4 * time.Second), renew, latency(0), wait(validity - 4*time.Second - time.Millisecond)}, true},
		{"a failed update does not extend", []step{renew, wait(8 * time.Second), failedRenew, wait(3 * time.Second)}, false},
		{"a failed update alone does not hold", []step{failedRenew}, false},
		{"a failed create does not hold", []step{failedCreate}, false},
		{"a failed update does not end a valid lease", []step{renew, wait(time.Second), failedRenew}, true},
		{"get does not extend", []step{renew, wait(8 * time.Second), get, wait(3 * time.Second)}, false},
		{"a later successful renewal extends", []step{renew, wait(8 * time.Second), renew, wait(8 * time.Second)}, true},
		{"a paused replica is not held when it resumes", []step{renew, wait(40 * time.Second)}, false},
		{"a paused replica whose renewal then fails stays not held", []step{renew, wait(40 * time.Second), get, failedRenew}, false},
		{"a release gives the lease up at once", []step{renew, release}, false},
		{"a release that fails still gives the lease up", []step{renew, failedRelease}, false},
		{"a record naming another holder gives the lease up", []step{renew, writeForOther}, false},
		{"a renewal after a release holds again", []step{renew, release, wait(time.Second), renew}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			f := &fakeLock{clock: clk}
			l, err := NewLock(f, validity, clk)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.steps {
				s(t, l, f)
			}
			if got := l.Held(); got != c.want {
				t.Errorf("Held() = %v, want %v (calls: %s)", got, c.want, f)
			}
		})
	}
}

func TestNewLockRefusesNonsense(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	if _, err := NewLock(nil, time.Second, clk); err == nil {
		t.Error("a nil inner lock was accepted")
	}
	if _, err := NewLock(&fakeLock{clock: clk}, 0, clk); err == nil {
		t.Error("a zero validity was accepted")
	}
}

func TestLockPassesCallsOn(t *testing.T) {
	_, f, l := newTestLock(t)
	get(t, l, f)
	create(t, l, f)
	renew(t, l, f)
	if got := f.String(); got != "get,create,update" {
		t.Errorf("inner calls %q, want get,create,update", got)
	}
	if l.Identity() != me || l.Describe() != "test/lease" {
		t.Errorf("Identity %q, Describe %q", l.Identity(), l.Describe())
	}
}

func TestEventsOnlyWhileHeld(t *testing.T) {
	clk, f, l := newTestLock(t)
	l.RecordEvent("before")
	create(t, l, f)
	l.RecordEvent("became leader")
	clk.SetTime(clk.Now().Add(RenewDeadline))
	l.RecordEvent("stopped leading")
	if got, want := f.String(), "create,event became leader"; got != want {
		t.Errorf("inner calls %q, want %q: events pass only while the lease is held", got, want)
	}
}

// The timing must keep Held inside the lease: validity (the renew
// deadline) below the lease duration.
func TestTimingLeavesAMargin(t *testing.T) {
	if !(RetryPeriod < RenewDeadline && RenewDeadline < LeaseDuration) {
		t.Errorf("want RetryPeriod < RenewDeadline < LeaseDuration, have %s, %s, %s", RetryPeriod, RenewDeadline, LeaseDuration)
	}
}

func TestNamespace(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, strings.ReplaceAll(content, "\n", "nl")+"-ns")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, flag, path, want, wantErr string
	}{
		{name: "the flag wins over the pod's namespace", flag: "ops", path: file("task-operator-system"), want: "ops"},
		{name: "without the flag the pod's namespace is used", path: file("task-operator-system"), want: "task-operator-system"},
		{name: "a trailing newline in the file is ignored", path: file("team-a\n"), want: "team-a"},
		{name: "neither flag nor pod is an error naming the flag", path: filepath.Join(dir, "missing"), wantErr: "--leader-election-namespace"},
		{name: "an empty file is an error naming the flag", path: file(""), wantErr: "--leader-election-namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := namespaceFrom(c.flag, c.path)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("namespaceFrom(%q, %q) = %q, %v; want an error with %q", c.flag, c.path, got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("namespaceFrom(%q, %q) = %q, %v; want %q", c.flag, c.path, got, err, c.want)
			}
		})
	}
}

func TestNewLeaseLockIsBuiltLikeControllerRuntimes(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", UserAgent: "manager"}
	ll, err := NewLeaseLock(cfg, "task-operator-system", "task-operator.batch.taskops.io", RenewDeadline)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ll.Describe(), "task-operator-system/task-operator.batch.taskops.io"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	host, _ := os.Hostname()
	if id := ll.Identity(); !strings.HasPrefix(id, host+"_") || len(id) < len(host)+1+36 {
		t.Errorf("Identity() = %q, want %q + \"_\" + a UUID", id, host)
	}
	if cfg.UserAgent != "manager" || cfg.Timeout != 0 {
		t.Errorf("the caller's config was changed: user agent %q, timeout %s", cfg.UserAgent, cfg.Timeout)
	}
	if ll.LockConfig.EventRecorder != nil {
		t.Error("the lock has an event recorder before the manager gave it one")
	}
	other, err := NewLeaseLock(cfg, "task-operator-system", "task-operator.batch.taskops.io", RenewDeadline)
	if err != nil {
		t.Fatal(err)
	}
	if other.Identity() == ll.Identity() {
		t.Errorf("two locks share the identity %q", ll.Identity())
	}
}

// The elector writes from its goroutine while reconcile workers ask Held.
func TestHeldIsSafeForConcurrentUse(t *testing.T) {
	_, f, l := newTestLock(t)
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			for {
				select {
				case <-done:
					return
				default:
					l.Held()
				}
			}
		}()
	}
	for i := 0; i < 1000; i++ {
		renew(t, l, f)
	}
	close(done)
	if !l.Held() {
		t.Error("not held after a renewal")
	}
}

// newTestLock is a Lock of validity RenewDeadline around a fake inner lock,
// both on a fake clock at the present.
func newTestLock(t *testing.T) (*clocktesting.FakePassiveClock, *fakeLock, *Lock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f := &fakeLock{clock: clk}
	l, err := NewLock(f, RenewDeadline, clk)
	if err != nil {
		t.Fatal(err)
	}
	return clk, f, l
}
