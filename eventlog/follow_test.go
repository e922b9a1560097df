package eventlog_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/probe"
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
		evs = append(evs, keyIssued(pt))
	}
	if _, err := probe.Fill(ctx, l, evs); err != nil {
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

// A shared reader hands out only public events and settles the internal
// ones as they arrive; when its consuming ends, the public events it had
// taken from the server and not handed out are handed back at once, so
// another instance (or the next start) has them without waiting out the
// hold. Before, a stop left them held for the hold (80 s in the service):
// the service's next start waited that long for its fan-out to catch up.
func TestASharedReaderHandsBackWhatItTookAndDidNotHandOut(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")
	// Three public events, each after an internal one.
	var public []uint64
	for i := range 3 {
		seqs, err := probe.Fill(ctx, l, []domain.Event{keyIssued(pt), credited(t, pt, "handback-"+strconv.Itoa(i), domain.Hundredths(100+i))})
		if err != nil {
			t.Fatal(err)
		}
		public = append(public, seqs[1])
	}
	r, err := l.OpenSharedReader(ctx, eventlog.SharedReaderConfig{Name: "handback", Hold: time.Hour, MaxOut: 100}, func(err error) { t.Errorf("unreadable: %v", err) })
	if err != nil {
		t.Fatal(err)
	}

	// One event at a time: the first is handed out and kept unsettled,
	// the next two are taken from the server and wait in the reader.
	first := make(chan eventlog.Delivery, 1)
	cctx, stop := context.WithCancel(ctx)
	// A failure below must not leave the handler waiting, nor the reader
	// with it, for the ledger's clean-up.
	defer stop()
	ended := make(chan error, 1)
	go func() {
		ended <- r.Consume(cctx, 1, func(ds []eventlog.Delivery) {
			for _, d := range ds {
				if !d.Record.Public {
					t.Errorf("handed out internal sequence %d", d.Record.Seq)
				}
				select {
				case first <- d:
				default:
					t.Errorf("handed out sequence %d while the first was still held", d.Record.Seq)
				}
			}
			<-cctx.Done()
		})
	}()
	var kept eventlog.Delivery
	select {
	case kept = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no event handed out")
	}
	// The server has sent what the reader asked for: every event, or as
	// many as the reader had room for (the rest wait on the server).
	eventlogtest.WaitFor(t, 10*time.Second, "the server to send what the reader asked for", func() bool {
		pending, asked, _, err := r.OutForTest(ctx)
		return err == nil && (pending == 0 || asked == 0)
	})
	stop()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("consuming ended with %v", err)
	}

	// The two it did not hand out come again at once; the one handed out
	// stays held (an hour).
	got := make(chan uint64, 3)
	cctx2, stop2 := context.WithTimeout(ctx, 30*time.Second)
	defer stop2()
	go func() {
		_ = r.Consume(cctx2, 10, func(ds []eventlog.Delivery) {
			for _, d := range ds {
				d.Ack()
				select {
				case got <- d.Record.Seq:
				default:
					t.Errorf("handed out sequence %d again, beyond the two awaited", d.Record.Seq)
				}
			}
		})
	}()
	var again []uint64
	for len(again) < 2 {
		select {
		case seq := <-got:
			again = append(again, seq)
		case <-time.After(10 * time.Second):
			t.Fatalf("handed out again: %v; want the two not handed out before, at once", again)
		}
	}
	slices.Sort(again)
	want := slices.DeleteFunc(slices.Sorted(slices.Values(public)), func(seq uint64) bool { return seq == kept.Record.Seq })
	if !slices.Equal(again, want) {
		t.Fatalf("handed out again %v, want %v (the first, %d, was handed out and stays held)", again, want, kept.Record.Seq)
	}
	// The internal events were settled, the first public one is held.
	eventlogtest.WaitFor(t, 10*time.Second, "the two acknowledgements", func() bool {
		pending, _, unsettled, err := r.OutForTest(ctx)
		return err == nil && pending == 0 && unsettled == 1
	})
}

// endedCtx reports itself ended while its Done never closes: the caller's
// context as it looks in the moment after its Done closed and before the
// contexts made from it are cancelled (a context closes its Done first).
type endedCtx struct{ context.Context }

func (endedCtx) Err() error { return context.Canceled }

// Once its caller's context has ended, a shared reader hands nothing more
// out, even before that has reached the contexts it made from it: what it
// took from the server goes back at once. A handler that returned on the
// caller's Done could otherwise be handed more in that moment, and those
// would stay held for the hold (TestASharedReaderHandsBackWhatItTookAndDidNotHandOut
// failed so, once, under CI's load).
func TestASharedReaderHandsNothingOutOnceItsCallerEnded(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")
	seqs, err := probe.Fill(ctx, l, []domain.Event{credited(t, pt, "ended-0", 100), credited(t, pt, "ended-1", 101)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.OpenSharedReader(ctx, eventlog.SharedReaderConfig{Name: "ended", Hold: time.Hour, MaxOut: 100}, func(err error) { t.Errorf("unreadable: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		ended <- r.Consume(endedCtx{ctx}, 10, func(ds []eventlog.Delivery) {
			for _, d := range ds {
				t.Errorf("handed out sequence %d after the caller's context ended", d.Record.Seq)
			}
		})
	}()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("consuming ended with %v, want the caller's context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consuming went on for 10 s after its caller's context ended")
	}

	// Both come again at once: handed back, not held for the hour.
	cctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	got := make(chan uint64, len(seqs))
	go func() {
		_ = r.Consume(cctx, 10, func(ds []eventlog.Delivery) {
			for _, d := range ds {
				d.Ack()
				got <- d.Record.Seq
			}
		})
	}()
	var again []uint64
	for len(again) < len(seqs) {
		select {
		case seq := <-got:
			again = append(again, seq)
		case <-cctx.Done():
			t.Fatalf("handed out again %v; want %v at once", again, seqs)
		}
	}
	slices.Sort(again)
	if want := slices.Sorted(slices.Values(seqs)); !slices.Equal(again, want) {
		t.Errorf("handed out again %v, want %v", again, want)
	}
}

// A shared reader whose hold is short keeps an event its handler still
// works on past the hold (it tells the server so), up to MaxHold, and then
// lets it go: a dead instance's events wait only the hold, a slow one's up
// to MaxHold.
func TestASharedReaderKeepsWhatItWorksOnUpToMaxHold(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")
	seqs, err := probe.Fill(ctx, l, []domain.Event{credited(t, pt, "kept-alive", 100)})
	if err != nil {
		t.Fatal(err)
	}
	const hold, maxHold = 3 * time.Second, 9 * time.Second
	r, err := l.OpenSharedReader(ctx, eventlog.SharedReaderConfig{Name: "alive", Hold: hold, MaxHold: maxHold, MaxOut: 10}, func(err error) { t.Errorf("unreadable: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan time.Time, 10)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = r.Consume(cctx, 10, func(ds []eventlog.Delivery) {
			for _, d := range ds {
				if d.Record.Seq == seqs[0] {
					handed <- time.Now() // and never settled
				}
			}
		})
	}()
	var first time.Time
	select {
	case first = <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("the event was not handed out")
	}
	select {
	case again := <-handed:
		// Kept alive until MaxHold less the hold at the least, then the
		// hold runs out: without the keeping alive it comes back after
		// the hold.
		if d := again.Sub(first); d < maxHold-hold {
			t.Fatalf("handed out again %s after the first time: kept alive only for the hold (%s), not up to MaxHold (%s)", d.Round(time.Millisecond), hold, maxHold)
		}
	case <-time.After(maxHold + 2*hold):
		t.Fatalf("not handed out again within %s: kept past MaxHold (%s)", maxHold+2*hold, maxHold)
	}
}
