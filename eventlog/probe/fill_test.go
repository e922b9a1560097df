package probe_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/probe"
)

// FeedRaw hands each message from the given sequence on to the handler
// once, counts what the handler reports failed, leaves no consumer
// behind, and refuses at once a range the ledger does not hold.
func TestFeedRawHandsEachMessageOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := eventlogtest.Open(t, domain.Sandbox)
	// Fill appends with no condition: the partner's aggregate need not
	// have been created through a command first.
	pt := domain.NewID(domain.PrefixPartner)
	var evs []domain.Event
	for range 40 {
		key := domain.GenerateKey(domain.Sandbox)
		evs = append(evs, domain.NewEvent(pt, pt, "", time.Now(), &domain.KeyIssued{KeyID: key.ID, Prefix: key.Prefix, Hash: key.Hash}))
	}
	seqs, err := probe.Fill(ctx, l, evs)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seqs)
	from, last := seqs[10], seqs[len(seqs)-1]
	n := int(last - from + 1)

	js := l.JetStream()
	consumers := func() map[string][]string { // each stream's
		out := map[string][]string{}
		for name := range js.StreamNames(ctx).Name() {
			s, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			for c := range s.ConsumerNames(ctx).Name() {
				out[name] = append(out[name], c)
			}
		}
		return out
	}
	before := consumers()

	var mu sync.Mutex
	seen := map[string]int{}
	calls := 0
	r, err := probe.FeedRaw(ctx, l, from, n, 8, 3, func(data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		seen[string(data)]++
		calls++
		return calls != 5 // one failure, counted
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages != n || r.Failed != 1 || calls != n || len(seen) != n {
		t.Fatalf("fed %+v, %d calls over %d distinct messages: want %d each, 1 failed", r, calls, len(seen), n)
	}
	// Both consumers are gone (before Follow below makes its own).
	for name, cs := range consumers() {
		for _, c := range cs {
			if !slices.Contains(before[name], c) {
				t.Errorf("consumer %s left on %s", c, name)
			}
		}
	}

	// The messages handed over are the ledger's from the sequence on: the
	// ordered read of the same range finds each of them.
	var want int
	err = l.Follow(ctx, from, 100, func(recs []eventlog.Record) error {
		for _, rec := range recs {
			if rec.Seq > last {
				return context.Canceled
			}
			if seen[string(rec.Data)] != 1 {
				t.Errorf("record %d handed over %d times", rec.Seq, seen[string(rec.Data)])
			}
			want++
		}
		if want == n {
			return context.Canceled
		}
		return nil
	})
	if err != context.Canceled || want != n {
		t.Fatalf("follow: %v after %d records", err, want)
	}

	if _, err := probe.FeedRaw(ctx, l, 0, n, 8, 3, func([]byte) bool { return true }); err == nil {
		t.Error("FeedRaw from sequence 0: no error")
	}
	// One more than the ledger holds: an error, not a wait for it.
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := probe.FeedRaw(short, l, from, n+1, 8, 3, func([]byte) bool { return true }); err == nil || short.Err() != nil {
		t.Errorf("FeedRaw past the ledger's end: %v (context: %v)", err, short.Err())
	}
}
