package delivery_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// Attempts recorded without waiting, in a burst that the log stores several
// to a message, and one recorded synchronously after them, are listed in
// the order they were recorded, the newest AttemptsListed of them; Newest
// is the last recorded; another endpoint's attempts stay apart.
func TestAttemptLogKeepsTheOrderOfABurst(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	log, err := delivery.OpenAttemptLog(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	partner, ep, other := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixEndpoint), domain.NewID(domain.PrefixEndpoint)
	const burst = 3 * delivery.AttemptsListed
	lost := recordBurst(t, log, partner, burst, ep, other)
	if err := log.Record(ctx, partner, attempt(ep, burst, domain.DeliveryFailed)); err != nil {
		t.Fatal(err)
	}
	settleNoneLost(t, log, lost)
	got, err := log.Last(ctx, partner, ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != delivery.AttemptsListed {
		t.Fatalf("listed %d attempts, want %d", len(got), delivery.AttemptsListed)
	}
	for i, at := range got {
		if want := fmt.Sprintf("evt_%d", burst-i); at.EventID != want || at.EndpointID != ep {
			t.Fatalf("attempt %d is %s of %s, want %s of %s (newest first)", i, at.EventID, at.EndpointID, want, ep)
		}
	}
	if got[0].Outcome != domain.DeliveryFailed {
		t.Fatalf("the synchronous record is not the newest: %+v", got[0])
	}
	newest, err := log.Newest(ctx, partner, ep)
	if err != nil || newest == nil || newest.ID != got[0].ID {
		t.Fatalf("Newest = %+v, %v; want %s", newest, err, got[0].ID)
	}
	others, err := log.Last(ctx, partner, other)
	if err != nil || len(others) != delivery.AttemptsListed {
		t.Fatalf("the other endpoint's log: %d attempts, %v", len(others), err)
	}
	if want := fmt.Sprintf("evt_%d", burst-1); others[0].EventID != want || others[0].EndpointID != other {
		t.Fatalf("the other endpoint's newest: %+v, want %s", others[0], want)
	}
}

// A burst's attempts that waited together behind AttemptsListed newer ones
// of their endpoint are never sent: the log would not keep them. The log
// stores fewer attempts than were recorded, reports none lost, and lists
// the newest AttemptsListed.
func TestAttemptLogSendsOnlyWhatItKeeps(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	log, err := delivery.OpenAttemptLog(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	partner, ep := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixEndpoint)
	const burst = 4 * delivery.AttemptsListed
	settleNoneLost(t, log, recordBurst(t, log, partner, burst, ep))
	stream, err := l.JetStream().Stream(ctx, "WEBHOOK_ATTEMPTS_SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ats, err := delivery.DecodeAttemptsForTest(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		stored += len(ats)
	}
	// The first attempt goes at once, on its own; the rest gather during
	// that round and the pause after it, and only their newest
	// AttemptsListed are sent.
	if stored >= burst || stored < delivery.AttemptsListed {
		t.Fatalf("the log stored %d attempts of %d recorded; want the newest %d and at most a round's more", stored, burst, delivery.AttemptsListed)
	}
	got, err := log.Last(ctx, partner, ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != delivery.AttemptsListed || got[0].EventID != fmt.Sprintf("evt_%d", burst-1) ||
		got[len(got)-1].EventID != fmt.Sprintf("evt_%d", burst-delivery.AttemptsListed) {
		t.Fatalf("listed %d attempts, newest %s: want the newest %d", len(got), got[0].EventID, delivery.AttemptsListed)
	}
}

// recordBurst records n successful attempts to each of endpoints without
// waiting, the i-th of every endpoint before the (i+1)-th of any, and
// returns the count of those reported lost.
func recordBurst(t *testing.T, log *delivery.AttemptLog, partner string, n int, endpoints ...string) *atomic.Int32 {
	t.Helper()
	lost := new(atomic.Int32)
	for i := range n {
		for _, endpoint := range endpoints {
			if err := log.RecordAsync(partner, attempt(endpoint, i, domain.DeliverySucceeded), func(error) { lost.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return lost
}

// settleNoneLost waits for the log to send what it holds and fails the
// test if any attempt was reported lost.
func settleNoneLost(t *testing.T, log *delivery.AttemptLog, lost *atomic.Int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log.Settle(ctx)
	if n := lost.Load(); n != 0 {
		t.Fatalf("%d attempts reported lost", n)
	}
}

// attempt is the i-th attempt of a burst to endpoint, for the tests above.
func attempt(endpoint string, i int, outcome domain.DeliveryOutcome) domain.DeliveryAttempt {
	return domain.DeliveryAttempt{
		ID: domain.NewID(domain.PrefixAttempt), EndpointID: endpoint, EventID: fmt.Sprintf("evt_%d", i),
		EventType: "deposit.received", Attempt: 1, Outcome: outcome, AttemptedAt: time.Now().UTC(),
	}
}
