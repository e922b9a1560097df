package domain

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/segmentio/ksuid"
)

func TestEventIDsOfAPartnerSortInTheOrderTheyAreMade(t *testing.T) {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = NewEvent("pt_a", "ag_1", "", time.Now(), &DepositReceived{}).ID
	}
	for i, id := range ids {
		if !ValidID(PrefixEvent, id) {
			t.Fatalf("id %d, %q, is not an event id", i, id)
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("id %d, %q, does not sort after the one before it, %q", i, id, ids[i-1])
		}
	}
}

func TestOrderedIDsStepWithinASecondAndStartAnewInTheNext(t *testing.T) {
	var g orderedIDs
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a := g.next("pt_a", t0)
	b := g.next("pt_a", t0.Add(900*time.Millisecond))
	if !a.Time().Equal(t0) || !b.Time().Equal(t0) || ksuid.Compare(a, b) >= 0 {
		t.Fatalf("within a second: %s (%s) then %s (%s)", a, a.Time(), b, b.Time())
	}
	if step := binary.BigEndian.Uint64(b.Payload()[8:]) - binary.BigEndian.Uint64(a.Payload()[8:]); step == 1 {
		t.Errorf("%s follows %s by one: the step should be random (1 in 2^32 runs)", b, a)
	}
	t1 := t0.Add(time.Second)
	c := g.next("pt_a", t1)
	if !c.Time().Equal(t1) || ksuid.Compare(b, c) >= 0 {
		t.Fatalf("the next second: %s (%s) after %s", c, c.Time(), b)
	}
}

func TestOrderedIDsOfOneScopeTellNothingOfAnother(t *testing.T) {
	var g orderedIDs
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a1 := g.next("pt_a", t0)
	var others []ksuid.KSUID
	for range 1000 {
		others = append(others, g.next("pt_b", t0))
	}
	a2 := g.next("pt_a", t0)
	// One step of a's, whatever b made meanwhile; and b's own in order.
	if step := binary.BigEndian.Uint64(a2.Payload()[8:]) - binary.BigEndian.Uint64(a1.Payload()[8:]); string(a1.Payload()[:8]) != string(a2.Payload()[:8]) || step < 1 || step > 1<<32 {
		t.Fatalf("pt_a's next id %s is not one step past %s after 1,000 of pt_b's", a2, a1)
	}
	for i := 1; i < len(others); i++ {
		if ksuid.Compare(others[i-1], others[i]) >= 0 {
			t.Fatalf("pt_b's id %d does not sort after the one before it", i)
		}
	}
	if string(others[0].Payload()[:8]) == string(a1.Payload()[:8]) {
		t.Fatal("two scopes started from the same payload")
	}
}

func TestStepPayloadNeverWrapsAround(t *testing.T) {
	top, err := ksuid.FromParts(time.Now(), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0})
	if err != nil {
		t.Fatal(err)
	}
	if next, ok := stepPayload(top, 0x0f); !ok || next.Payload()[15] != 0xff {
		t.Fatalf("a step to the top: %v %x", ok, next.Payload())
	}
	if _, ok := stepPayload(top, 0x10); ok {
		t.Fatal("a step past the top wrapped around")
	}
	low, _ := ksuid.FromParts(time.Now(), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if next, ok := stepPayload(low, 1); !ok || next.Payload()[7] != 1 || next.Payload()[15] != 0 {
		t.Fatalf("a carry: %v %x", ok, next.Payload())
	}
}

func TestImportedChurchIDsSortInRowOrder(t *testing.T) {
	rows := make([]ImportRow, MaxImportRows)
	for i := range rows {
		rows[i] = ImportRow{Name: "Church"}
	}
	ev, _, err := ImportChurches("pt_a", rows, func(string) bool { return false }, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	created := ev.Payload.(*ChurchesImported).Created
	for i, c := range created {
		if !ValidID(PrefixChurch, c.ID) {
			t.Fatalf("row %d: %q is not a church id", i, c.ID)
		}
		if i > 0 && c.ID <= created[i-1].ID {
			t.Fatalf("row %d: %q does not sort after row %d's %q", i, c.ID, i-1, created[i-1].ID)
		}
	}
}
