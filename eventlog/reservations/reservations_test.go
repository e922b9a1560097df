package reservations_test

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/reservations"
)

func open(t *testing.T, l *eventlog.Ledger, instance string, lease time.Duration) *reservations.Store {
	t.Helper()
	s, err := reservations.Open(context.Background(), l, reservations.Config{Instance: instance, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReservationRules(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	here := open(t, l, "a", time.Minute)
	key := reservations.ExternalID("pt_1", "crm-1")

	first, err := here.Reserve(ctx, key, "holder-1")
	if err != nil || !first.Mine {
		t.Fatalf("a free key: %+v %v", first, err)
	}
	again, err := here.Reserve(ctx, key, "holder-1")
	if err != nil || !again.Mine || again.Until.Before(first.Until) {
		t.Fatalf("its holder again (a retry): %+v %v, want it renewed", again, err)
	}
	other, err := here.Reserve(ctx, key, "holder-2")
	if err != nil || other.Mine || other.Stale {
		t.Fatalf("another holder within the lease: %+v %v", other, err)
	}
	if _, ok, err := here.TakeOver(ctx, first, "holder-2"); ok || err != nil {
		t.Fatalf("a take-over on a revision since renewed: %v %v", ok, err)
	}
	if k := reservations.ExternalID("pt_2", "crm-1"); k == key {
		t.Fatal("partners share a key")
	}

	// A lease that ended, or a holder whose process is gone, is stale.
	brief := open(t, l, "b", time.Millisecond)
	lapsed := reservations.ExternalID("pt_1", "crm-2")
	if r, err := brief.Reserve(ctx, lapsed, "crashed"); err != nil || !r.Mine {
		t.Fatalf("%+v %v", r, err)
	}
	var seen reservations.Reservation
	eventlogtest.WaitFor(t, time.Second, "a lapsed lease to be stale", func() bool {
		seen, err = here.Reserve(ctx, lapsed, "holder-3")
		if err != nil || seen.Mine {
			t.Fatalf("a lapsed lease: %+v %v", seen, err)
		}
		return seen.Stale
	})
	took, ok, err := here.TakeOver(ctx, seen, "holder-3")
	if err != nil || !ok || !took.Mine {
		t.Fatalf("take over: %+v %v %v", took, ok, err)
	}
	if _, ok, err := here.TakeOver(ctx, seen, "holder-4"); ok || err != nil {
		t.Fatalf("a second take-over on the same revision: %v %v", ok, err)
	}
	earlierBoot := open(t, l, "a", time.Minute)
	gone := reservations.ExternalID("pt_1", "crm-3")
	if _, err := earlierBoot.Reserve(ctx, gone, "before-restart"); err != nil {
		t.Fatal(err)
	}
	rebooted := open(t, l, "a", time.Minute)
	if r, err := rebooted.Reserve(ctx, gone, "after-restart"); err != nil || r.Mine || !r.Stale {
		t.Fatalf("an earlier boot's reservation: %+v %v, want it stale at once", r, err)
	}

	// A release removes only the reservation it read.
	held, found, err := here.Held(ctx, key)
	if err != nil || !found {
		t.Fatalf("held: %v %v", found, err)
	}
	if err := here.Release(ctx, first); err != nil {
		t.Fatalf("release of a revision since renewed: %v", err)
	}
	if _, found, _ := here.Held(ctx, key); !found {
		t.Fatal("a release of an old revision removed the reservation")
	}
	if err := here.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, found, err := here.Held(ctx, key); found || err != nil {
		t.Fatalf("released: found %v %v", found, err)
	}
	if r, err := here.Reserve(ctx, key, "holder-2"); err != nil || !r.Mine {
		t.Fatalf("a released key: %+v %v", r, err)
	}
}
