package projections

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// A transaction that fails stops the pipeline's follower with its error,
// keeps what committed before it and nothing after, and a new follower
// resumes from the checkpoint to the same file a rebuild makes.
func TestPipelineStopsAtAFailedTransactionAndResumes(t *testing.T) {
	ctx := context.Background()
	l := depositLedger(t, 500, 7)
	total := lastSeq(t, l)
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// The last batch fails: the follower must not wait for more events
	// to report it.
	broken := errors.New("disk full")
	var committed uint64
	pl := s.startPipeline(func(recs []eventlog.Record, evs []domain.Event) error {
		if recs[len(recs)-1].Seq == total {
			return broken
		}
		return s.applyDecoded(recs, evs)
	}, func() { committed = s.Applied() })
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = followInto(wait, l, pl, 100, nil)
	if !errors.Is(err, broken) || wait.Err() != nil {
		t.Fatalf("follower ended with %v (deadline: %v), want the transaction's error at once", err, wait.Err())
	}
	if s.Applied() == 0 || s.Applied() != committed || s.Applied() >= total {
		t.Fatalf("checkpoint %d after two batches (last committed %d, ledger %d)", s.Applied(), committed, total)
	}

	stop := func(last uint64) bool { return last >= total }
	if err := followInto(ctx, l, s.startPipeline(nil, nil), 100, stop); err != nil {
		t.Fatal(err)
	}
	if s.Applied() != total {
		t.Fatalf("resumed to %d, want %d", s.Applied(), total)
	}
	got, want := mustDump(t, s), rebuiltDump(t, l)
	if len(got["feed"]) != 500 || !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed file (%d feed entries) differs from a rebuild", len(got["feed"]))
	}
}

// A rebuild's transaction spans several batches; one that fails drops
// what it held since the last commit, stops the follower with its error at
// once, and a new span resumes from the checkpoint to the same file a
// rebuild makes.
func TestSpanningTransactionFailsAndResumes(t *testing.T) {
	ctx := context.Background()
	l := depositLedger(t, 500, 7)
	total := lastSeq(t, l)
	dir := t.TempDir()
	s, err := openRebuild(filepath.Join(dir, "spanned.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Batches of at most 100, a commit every 300 events or so. Once a
	// commit is made and events are applied after it, a batch fails in
	// its transaction (it misses its first event).
	span := s.newTxSpan(300)
	var failedPast uint64
	pl := s.startPipelineEnding(func(recs []eventlog.Record, evs []domain.Event) error {
		if failedPast == 0 && s.Applied() > 0 && span.held > 0 {
			failedPast = span.last
			return span.apply(recs[1:], evs[1:])
		}
		return span.apply(recs, evs)
	}, span.end, span.flush, nil, rebuildDepth)
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = followInto(wait, l, pl, 100, nil)
	if err == nil || !strings.Contains(err.Error(), "gap in ledger") || wait.Err() != nil {
		t.Fatalf("follower ended with %v (deadline: %v), want the transaction's error at once", err, wait.Err())
	}
	if s.Applied() == 0 || s.Applied() >= failedPast || span.last != s.Applied() {
		t.Fatalf("checkpoint %d (span at %d) after a failure past %d: want the last commit's", s.Applied(), span.last, failedPast)
	}

	span = s.newTxSpan(300)
	stop := func(last uint64) bool { return last >= total }
	if err := followInto(ctx, l, s.startPipelineEnding(span.apply, span.end, span.flush, nil, rebuildDepth), 100, stop); err != nil {
		t.Fatal(err)
	}
	if s.Applied() != total {
		t.Fatalf("resumed to %d, want %d", s.Applied(), total)
	}
	got, want := mustDump(t, s), appliedDump(t, l)
	if len(got["feed"]) != 500 || !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed spanned file (%d feed entries) differs from one applied a transaction a batch", len(got["feed"]))
	}
}

// A deposit recorded as one event carrying its credit projects exactly as
// the same deposit recorded, as ledgers written before did, as two.
func TestACarriedCreditProjectsAsTheTwoEventsOfBefore(t *testing.T) {
	ctx := context.Background()
	current := depositEvents(t, 30, 4, false, numberedTrace)
	var legacy []domain.Event
	for _, ev := range current {
		legacy = append(legacy, asBefore(ev)...)
	}
	if len(legacy) != 2*len(current) {
		t.Fatalf("%d events before for %d deposits", len(legacy), len(current))
	}
	balances := func(events []domain.Event) map[string]string {
		l := filledLedger(t, events)
		s, err := Open(filepath.Join(t.TempDir(), "p.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for after := uint64(0); after < uint64(len(events)); {
			recs, _, err := l.Read(ctx, l.Subjects().All(), after, 100)
			if err != nil || len(recs) == 0 {
				t.Fatalf("read after %d of %d events: %v", after, len(events), err)
			}
			if err := s.Apply(recs); err != nil {
				t.Fatal(err)
			}
			after = recs[len(recs)-1].Seq
		}
		d := mustDump(t, s)
		if len(d["church_balances"]) != 4 || len(d["church_account_totals"]) != 4 || len(d["deposits"]) != 30 {
			t.Fatalf("balances %v, accounts %v, %d deposits: want the 4 churches' and their one account each, 30 deposits", d["church_balances"], d["church_account_totals"], len(d["deposits"]))
		}
		first := current[0]
		received := first.Payload.(*domain.DepositReceived)
		credit := first.Internal.(*domain.DepositCredited)
		dep, err := s.Deposit(first.PartnerID, received.Trace)
		want := domain.Deposit{ChurchID: first.ChurchID, AccountRef: credit.AccountRef, Amount: credit.Amount, BankTS: credit.BankTS, Credited: true, Announced: true}
		if err != nil || dep != want {
			t.Fatalf("deposit %s: %+v, %v; want %+v", received.Trace, dep, err, want)
		}
		return map[string]string{"balances": fmt.Sprint(d["church_balances"]), "accounts": fmt.Sprint(d["church_account_totals"]), "deposits": fmt.Sprint(d["deposits"])}
	}
	if got, want := balances(current), balances(legacy); !reflect.DeepEqual(got, want) {
		t.Fatalf("carried credits project\n%v\nbefore:\n%v", got, want)
	}
}

// rebuiltDump returns every bucket of a file rebuilt from l.
func rebuiltDump(t *testing.T, l *eventlog.Ledger) map[string]map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rebuilt.db")
	if err := BuildFile(context.Background(), l, path, nil); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return mustDump(t, s)
}

// appliedDump returns every bucket of a file a live projector makes of l:
// a transaction a batch of at most 100 events.
func appliedDump(t *testing.T, l *eventlog.Ledger) map[string]map[string]string {
	t.Helper()
	total := lastSeq(t, l)
	s, err := Open(filepath.Join(t.TempDir(), "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := followInto(context.Background(), l, s.startPipeline(nil, nil), 100, func(last uint64) bool { return last >= total }); err != nil {
		t.Fatal(err)
	}
	return mustDump(t, s)
}

// lastSeq returns the ledger's last sequence.
func lastSeq(tb testing.TB, l *eventlog.Ledger) uint64 {
	tb.Helper()
	last, err := l.LastSeq(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return last
}

// mustDump returns every bucket of s, for comparing two files.
func mustDump(t *testing.T, s *Store) map[string]map[string]string {
	t.Helper()
	d, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A rebuild's span that writes its feed, feed types and public events in
// chunks, while the applier would wait (txSpan.flush), makes the same file
// as one applied a transaction a batch.
func TestFlushedSpanMakesTheSameFile(t *testing.T) {
	recs, evs := readDecoded(t, depositLedger(t, 2000, 7), 500)
	dir := t.TempDir()
	s, err := openRebuild(filepath.Join(dir, "flushed.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Commits every 700 events or so; a flush after every batch of 50.
	span := s.newTxSpan(700)
	flushed := 0
	for from := 0; from < len(recs); from += 50 {
		to := min(from+50, len(recs))
		if err := span.apply(recs[from:to], evs[from:to]); err != nil {
			t.Fatal(err)
		}
		if span.tx != nil && span.first > 0 && len(span.indexes.puts[indexFeedEntries]) > 0 {
			flushed++
		}
		if _, err := span.flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := span.end(true); err != nil {
		t.Fatal(err)
	}
	if flushed == 0 {
		t.Fatal("no span wrote its feed before its commit")
	}
	live, err := Open(filepath.Join(dir, "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	for from := 0; from < len(recs); from += 50 {
		if err := live.Apply(recs[from:min(from+50, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	got, want := mustDump(t, s), mustDump(t, live)
	if len(got["feed"]) != 2000 || !reflect.DeepEqual(got, want) {
		t.Fatalf("flushed file (%d feed entries) differs from one applied a transaction a batch", len(got["feed"]))
	}
}
