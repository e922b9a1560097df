package eventlog_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/telemetry"
)

// Under load, appends share atomic batches; each keeps its own
// optimistic-concurrency check and dedup id. The appends below run with
// group commit forced (every append that finds another in flight joins a
// batch). First a load of new aggregates: batches of more than one event
// must be stored. Then a mix, in the same moments, of new aggregates, pairs
// racing for one aggregate, an append with a stale expectation, and repeats
// of a dedup id already stored or sent twice at once: every append must get
// the answer it would get alone, and the ledger must hold exactly the
// winners.
func TestGroupCommitKeepsEachAppendsChecks(t *testing.T) {
	ctx := context.Background()
	metrics := telemetry.NewMetrics()
	// Every append that finds another under way joins a batch.
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir(), Metrics: metrics, GroupCommitAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)

	partner := domain.NewID(domain.PrefixPartner)
	event := func(aggregate string) domain.Event {
		return domain.NewEvent(partner, aggregate, "", time.Now(), &domain.PartnerCreated{
			Name: "Group Commit", Environment: "sandbox", RedirectOrigins: []string{"https://gc.example"},
		})
	}
	keyIssued := func(aggregate string) domain.Event {
		return domain.NewEvent(partner, aggregate, "", time.Now(), &domain.KeyIssued{KeyID: domain.NewID(domain.PrefixKey)})
	}
	// An aggregate that already has an event, for the stale expectation,
	// and a dedup id already stored, for the repeat.
	existing := domain.NewID(domain.PrefixPartner)
	first, err := l.Append(ctx, event(existing), "", 0)
	if err != nil {
		t.Fatal(err)
	}

	// The histogram of events per synced write.
	batches := func() (writes, events float64) {
		t.Helper()
		families, err := metrics.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "giving_ledger_batch_size" {
				h := f.GetMetric()[0].GetHistogram()
				return float64(h.GetSampleCount()), h.GetSampleSum()
			}
		}
		return 0, 0
	}
	var load sync.WaitGroup
	for range 256 {
		load.Go(func() {
			agg := domain.NewID(domain.PrefixPartner)
			if _, err := l.Append(ctx, event(agg), "", 0); err != nil {
				t.Errorf("append to %s: %v", agg, err)
			}
		})
	}
	load.Wait()
	writes, events := batches()
	if events != 257 || writes >= events {
		t.Fatalf("%.0f events in %.0f synced writes, want 257 events in fewer writes", events, writes)
	}
	t.Logf("a load of new aggregates: %.0f events in %.0f synced writes", events, writes)

	// Pairs racing for one aggregate, each pair two event types (two
	// subjects under the aggregate's guard; TestABatchChecksEachMember
	// AgainstTheStreamBeforeIt shows why that matters).
	var race sync.WaitGroup
	raced := map[string]*atomic.Int32{}
	for range 64 {
		agg := domain.NewID(domain.PrefixPartner)
		stored := &atomic.Int32{}
		raced[agg] = stored
		for _, ev := range []domain.Event{event(agg), keyIssued(agg)} {
			race.Go(func() {
				_, err := l.Append(ctx, ev, "", 0)
				switch {
				case err == nil:
					stored.Add(1)
				case !errors.Is(err, eventlog.ErrConflict):
					t.Errorf("append to %s: %v", agg, err)
				}
			})
		}
	}
	race.Wait()
	for agg, n := range raced {
		if n.Load() != 1 {
			t.Errorf("pair racing for %s: %d stored, want 1", agg, n.Load())
		}
	}
	const before = 257 + 64

	const rounds, fresh, pairs = 20, 24, 4
	type outcome struct {
		aggregate, msgID string
		app              eventlog.Appended
		err              error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	run := func(aggregate, msgID string, ev domain.Event, expect uint64) {
		wg.Go(func() {
			app, err := l.Append(ctx, ev, msgID, expect)
			mu.Lock()
			outcomes = append(outcomes, outcome{aggregate, msgID, app, err})
			mu.Unlock()
		})
	}
	racing := map[string]bool{}
	twice := map[string]bool{}
	for range rounds {
		for range fresh {
			agg := domain.NewID(domain.PrefixPartner)
			run(agg, "", event(agg), 0)
		}
		for range pairs {
			agg := domain.NewID(domain.PrefixPartner)
			racing[agg] = true
			run(agg, "", event(agg), 0)
			run(agg, "", event(agg), 0)
		}
		// The same command sent twice at once: one dedup id.
		agg := domain.NewID(domain.PrefixPartner)
		twice[agg] = true
		ev := event(agg)
		run(agg, "twice-"+agg, ev, 0)
		run(agg, "twice-"+agg, ev, 0)
		// Expects an empty aggregate that has an event.
		run(existing, "", event(existing), 0)
		// Repeats a stored command (expecting what its retry would load,
		// so that the dedup id, not the expectation, answers).
		run(existing, first.Record.MsgID, event(existing), first.Record.Seq)
	}
	wg.Wait()

	stored := map[uint64]string{}
	won := map[string]int{}
	dups := map[string]int{}
	for _, o := range outcomes {
		switch {
		case o.err != nil && errors.Is(o.err, eventlog.ErrConflict):
			if o.aggregate != existing && !racing[o.aggregate] && !twice[o.aggregate] {
				t.Errorf("append to %s: a conflict it did not cause", o.aggregate)
			}
		case o.err != nil:
			t.Errorf("append to %s: %v", o.aggregate, o.err)
		case o.app.Duplicate:
			dups[o.aggregate]++
			if o.aggregate == existing && o.app.Record.Seq != first.Record.Seq {
				t.Errorf("the repeat of a stored command answered sequence %d, want %d", o.app.Record.Seq, first.Record.Seq)
			}
		default:
			if o.aggregate == existing {
				t.Errorf("a stale expectation on %s was stored at %d", existing, o.app.Record.Seq)
			}
			if prev, ok := stored[o.app.Record.Seq]; ok {
				t.Errorf("sequence %d answered to two appends (%s and %s)", o.app.Record.Seq, prev, o.aggregate)
			}
			stored[o.app.Record.Seq] = o.aggregate
			won[o.aggregate]++
			rec, err := l.Get(ctx, o.app.Record.Seq)
			if err != nil || rec.Aggregate != o.aggregate || string(rec.Data) != string(o.app.Record.Data) {
				t.Errorf("sequence %d holds %s, %v; the append answered %s", o.app.Record.Seq, rec.Aggregate, err, o.aggregate)
			}
		}
	}
	for agg := range racing {
		if won[agg] != 1 {
			t.Errorf("racing pair on %s: %d stored, want exactly 1", agg, won[agg])
		}
	}
	for agg := range twice {
		// The second is a duplicate, or a conflict when the server
		// checked its expectation first; either way it stored nothing.
		if won[agg] != 1 {
			t.Errorf("one command sent twice on %s: %d stored, want 1", agg, won[agg])
		}
	}
	if dups[existing] != rounds {
		t.Errorf("repeats of a stored command: %d duplicates, want %d", dups[existing], rounds)
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(before + len(stored)); last != want {
		t.Fatalf("the ledger holds %d events; the appends stored %d (plus %d before)", last, want-before, before)
	}
	if _, total := batches(); total != float64(last) {
		t.Errorf("the batch histogram counts %.0f events, the ledger holds %d", total, last)
	}
}
