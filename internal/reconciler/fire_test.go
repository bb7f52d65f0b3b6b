package reconciler

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// fireAt is a fire whose wall clock the test moves.
func fireAt(wall *time.Time) *fire { return newFire(func() time.Time { return *wall }) }

func keyN(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("t%d", i)}
}

func expectN(f *fire, n int, at, now time.Time) {
	for i := range n {
		f.expect(keyN(i), at, now)
	}
}

var slot = time.Date(2026, 12, 1, 2, 30, 0, 0, time.UTC)

func TestAFewDueStartsAreNoFireAndRecordsAreWrittenAtOnce(t *testing.T) {
	wall := slot
	f := fireAt(&wall)
	expectN(f, fireMin-1, slot, slot.Add(-time.Minute))
	if f.waitRecord(keyN(1000), slot) {
		t.Fatalf("%d due starts made a record wait", fireMin-1)
	}
}

func TestStartsNotYetDueMakeNoFire(t *testing.T) {
	wall := slot
	f := fireAt(&wall)
	expectN(f, 100, slot.Add(time.Minute), slot)
	if f.waitRecord(keyN(1000), slot) {
		t.Fatal("starts due in a minute made a record wait now")
	}
}

func TestARecordWaitsWhileManyStartsAreDueAndIsHandedBackWhenTheyHaveRun(t *testing.T) {
	wall := slot
	f := fireAt(&wall)
	expectN(f, 100, slot, slot.Add(-time.Minute))
	record := keyN(1000)
	if !f.waitRecord(record, slot) {
		t.Fatal("a record did not wait while 100 starts were due")
	}
	for i := range 100 {
		f.begin(keyN(i), slot)
		f.starting()
		if len(f.wake) > 0 && i < 100-fireMin {
			t.Fatalf("handed back after %d of 100 starts began", i+1)
		}
		f.started(slot)
	}
	select {
	case e := <-f.wake:
		if e.Object.GetName() != record.Name {
			t.Fatalf("handed back %s", e.Object.GetName())
		}
	default:
		t.Fatal("the record was not handed back when the fire was over")
	}
	if f.waitRecord(record, slot) {
		t.Fatal("the record waits again after the fire")
	}
}

func TestARecordWaitsAtMostMaxRecordWait(t *testing.T) {
	wall := slot
	f := fireAt(&wall)
	expectN(f, 100, slot, slot.Add(-time.Minute))
	record := keyN(1000)
	if !f.waitRecord(record, slot) {
		t.Fatal("no wait")
	}
	wall = wall.Add(maxRecordWait - time.Millisecond)
	if !f.waitRecord(record, slot) {
		t.Fatal("stopped waiting before maxRecordWait")
	}
	wall = wall.Add(time.Millisecond)
	if f.waitRecord(record, slot) {
		t.Fatalf("still waiting after %s", maxRecordWait)
	}
}

func TestDueStartsWhosePassNeverCameStopCounting(t *testing.T) {
	wall := slot.Add(-time.Minute)
	f := fireAt(&wall)
	expectN(f, 100, slot, slot.Add(-time.Minute))
	wall = slot.Add(staleDue + time.Second)
	if f.waitRecord(keyN(1000), slot.Add(staleDue+time.Second)) {
		t.Fatal("stale due starts still make a fire")
	}
	if len(f.due) != 0 {
		t.Fatalf("%d stale entries kept", len(f.due))
	}
}

func TestANilFireNeverHoldsARecord(t *testing.T) {
	var f *fire
	f.expect(keyN(1), slot, slot)
	f.begin(keyN(1), slot)
	f.starting()
	f.started(slot)
	f.forget(keyN(1))
	if f.waitRecord(keyN(1), slot) {
		t.Fatal("a nil fire held a record")
	}
}
