package eventlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A follower catching up gets the backlog in full batches (the projector
// commits one transaction per batch), and the newest record is handed over
// at once, not held back for more.
func TestFollowHandsABacklogInFullBatches(t *testing.T) {
	// Long enough that a batch cut short by the wait, or a newest record
	// held for it, fails the test instead of passing slowly.
	defer eventlog.SetGatherWaitForTest(time.Minute)()
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")
	var evs []domain.Event
	for range 499 {
		key := domain.GenerateKey(domain.Sandbox)
		evs = append(evs, domain.NewEvent(pt, pt, "", time.Now(), &domain.KeyIssued{KeyID: key.ID, Prefix: key.Prefix, Hash: key.Hash}))
	}
	if _, err := l.Fill(ctx, evs); err != nil {
		t.Fatal(err)
	}
	done := errors.New("done")
	var sizes []int
	total := 0
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := l.Follow(fctx, 1, 100, func(recs []eventlog.Record) error {
		sizes = append(sizes, len(recs))
		if total += len(recs); total == 500 {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("follow: %v after batches %v", err, sizes)
	}
	for _, n := range sizes {
		if n != 100 {
			t.Fatalf("batches %v: want five of 100", sizes)
		}
	}

	got := make(chan uint64, 1)
	go func() {
		_ = l.Follow(fctx, 501, 100, func(recs []eventlog.Record) error {
			got <- recs[len(recs)-1].Seq
			return done
		})
	}()
	createPartner(t, l, "Beta") // sequence 501
	select {
	case seq := <-got:
		if seq != 501 {
			t.Fatalf("the follower got sequence %d, want 501", seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the newest record was held back waiting for more")
	}
}

// A shared reader whose consumer is gone from the server stops consuming
// with an error that says so (the fan-out logs it and tries again), instead
// of waiting in silence for deliveries that will never come.
func TestASharedReaderWhoseConsumerIsGoneFailsLoudly(t *testing.T) {
	defer eventlog.SetSharedReaderCheckForTest(100 * time.Millisecond)()
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	r, err := l.OpenSharedReader(ctx, eventlog.SharedReaderConfig{Name: "gone", Hold: time.Minute, MaxOut: 100}, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() { ended <- r.Consume(cctx, 10, func([]eventlog.Delivery) {}) }()
	select {
	case err := <-ended:
		t.Fatalf("consuming ended before the consumer went: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := r.DeleteForTest(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		// The server tells a connected client itself (409); the
		// reader's own check covers a deletion the client did not hear
		// (TestTheSharedReadersCheckFindsItsConsumerGone).
		if err == nil || !strings.Contains(err.Error(), "consumer deleted") && !strings.Contains(err.Error(), "gone from the server") || cctx.Err() != nil {
			t.Fatalf("consuming ended with %v (deadline: %v), want the consumer gone", err, cctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consuming went on for 10 s after its consumer was deleted")
	}
}

// The reader's own check ends the consuming once its consumer is no longer
// on the server, whatever the iterator heard.
func TestTheSharedReadersCheckFindsItsConsumerGone(t *testing.T) {
	defer eventlog.SetSharedReaderCheckForTest(50 * time.Millisecond)()
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	r, err := l.OpenSharedReader(ctx, eventlog.SharedReaderConfig{Name: "watched", Hold: time.Minute, MaxOut: 100}, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WatchForTest(ctx, 300*time.Millisecond); err != nil {
		t.Fatalf("the check found a live consumer gone: %v", err)
	}
	if err := r.DeleteForTest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WatchForTest(ctx, 5*time.Second); err == nil || !strings.Contains(err.Error(), "gone from the server") {
		t.Fatalf("the check after the deletion: %v", err)
	}
}
