package projections

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/probe"
)

// buildInSpans builds the file at path from l as catchUpFile does, in
// transactions of every events and batches of 3, and returns it open.
func buildInSpans(t *testing.T, l *eventlog.Ledger, path string, every int) *Store {
	t.Helper()
	total := lastSeq(t, l)
	s, err := openRebuild(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := func(last uint64) bool { return last >= total }
	span := s.newTxSpan(every)
	if err := followInto(context.Background(), l, s.startPipelineEnding(span.apply, span.end, span.flush, nil, rebuildDepth), 3, stop); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

// depositsWhere returns how many deposits the table holds and how many
// runs the file has.
func depositsWhere(t *testing.T, s *Store) (tabled, runs int) {
	t.Helper()
	if err := s.view(func(tx *bolt.Tx) error {
		tabled = tx.Bucket(bucketDeposits).Stats().KeyN
		if b := tx.Bucket(bucketDepositRuns); b != nil {
			runs = b.Stats().BucketN - 1
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return tabled, runs
}

// A file build writes each span's deposits as a run and leaves them: the
// file reads as one a live projector makes, and merging the runs into the
// deposits table, a step at a time, changes nothing it reads. The ledger
// holds deposits as ledgers written before the deposit book did (a credit,
// then its announcement, read back in the next span when they fall in two)
// and as the service records them now, with traces in no order of the
// ledger's; spans of 9 events and a merge of 5 deposits a transaction put
// a trace in two runs and take a dozen steps, and a merge cut short and
// started again from the first key ends the same.
func TestABuildsDepositRunsMergeIntoTheTable(t *testing.T) {
	l := filledLedger(t, append(depositEvents(t, 30, 4, true, numberedTrace), depositEvents(t, 30, 3, false, scatteredTrace)...))
	total := lastSeq(t, l)
	s := buildInSpans(t, l, filepath.Join(t.TempDir(), "built.db"), 7)
	defer s.Close()
	if tabled, runs := depositsWhere(t, s); tabled != 0 || runs < int(total)/9 {
		t.Fatalf("after the build: %d deposits in the table, %d runs; want none and a run a span", tabled, runs)
	}
	want := appliedDump(t, l)
	if got := mustDump(t, s); len(got["deposits"]) != 60 || !reflect.DeepEqual(got, want) {
		t.Fatalf("built file (%d deposits) differs from one applied a transaction a batch:\n%v\nwant\n%v", len(got["deposits"]), got["deposits"], want["deposits"])
	}
	merge := func(steps int) (int, bool) {
		var after []byte
		buf := &mergeBuffer{mem: arena{block: 1 << 10}}
		for n := 1; n <= steps; n++ {
			done := false
			if err := s.db.Update(func(tx *bolt.Tx) error {
				var err error
				after, done, err = mergeRunsStep(tx, after, 5, buf)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if done {
				return n, true
			}
		}
		return steps, false
	}
	merge(3)
	if tabled, runs := depositsWhere(t, s); tabled == 0 || runs == 0 {
		t.Fatalf("three steps in: %d deposits in the table, %d runs; want some of each", tabled, runs)
	}
	if got := mustDump(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("a file part merged differs from one applied a transaction a batch:\n%v\nwant\n%v", got["deposits"], want["deposits"])
	}
	steps, done := merge(100)
	if !done || steps < 12 {
		t.Fatalf("the merge started again took %d steps (done: %v), want at least 12 of 5 deposits", steps, done)
	}
	got := mustDump(t, s)
	if tabled, runs := depositsWhere(t, s); tabled == 0 || runs != 0 {
		t.Fatalf("after the merge: %d deposit blocks in the table, %d runs", tabled, runs)
	}
	if _, ok := got[string(bucketDepositRuns)]; ok || len(got["deposits"]) != 60 || !reflect.DeepEqual(got, want) {
		t.Fatalf("merged file (%d deposits) differs from one applied a transaction a batch:\n%v\nwant\n%v", len(got["deposits"]), got["deposits"], want["deposits"])
	}
}

// A built file serves with its runs: a credit the runs hold is announced by
// the follow loop into the table, and the loop, with nothing to apply,
// merges the runs, keeping the table's newer record of that deposit.
func TestTheFollowLoopMergesTheRunsUnderTheTablesNewerRecords(t *testing.T) {
	ctx := context.Background()
	// Ledgers written before the deposit book: a credit, then its
	// announcement. The last ten deposits' announcements come after
	// the build.
	pairs := depositEvents(t, 40, 4, true, numberedTrace)
	var first, later []domain.Event
	for i, ev := range pairs {
		if i >= 60 && i%2 == 1 {
			later = append(later, ev)
		} else {
			first = append(first, ev)
		}
	}
	l := filledLedger(t, first)
	path := filepath.Join(t.TempDir(), "built.db")
	built := buildInSpans(t, l, path, 7)
	if err := built.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.Fill(ctx, l, later); err != nil {
		t.Fatal(err)
	}
	total := lastSeq(t, l)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.runsLeft.Load() {
		t.Fatal("the built file opened without its runs noted")
	}
	// Applied without the merger first: the announcements go into the
	// table, the credits they announce are in the runs.
	if err := followInto(ctx, l, s.startPipeline(nil, nil), 100, func(last uint64) bool { return last >= total }); err != nil {
		t.Fatal(err)
	}
	late := later[len(later)-1].Payload.(*domain.DepositReceived)
	partner := later[len(later)-1].PartnerID
	if tabled, runs := depositsWhere(t, s); tabled == 0 || runs == 0 {
		t.Fatalf("after the announcements: %d deposit blocks in the table, %d runs; want both", tabled, runs)
	}
	want := appliedDump(t, l)
	if got := mustDump(t, s); !reflect.DeepEqual(got["deposits"], want["deposits"]) {
		t.Fatalf("deposits before the merge:\n%v\nwant\n%v", got["deposits"], want["deposits"])
	}
	// The table's record is the newer: announced; the run's is not.
	if d, err := s.Deposit(partner, late.Trace); err != nil || !d.Credited || !d.Announced {
		t.Fatalf("the last deposit before the merge: %+v, %v; want credited and announced", d, err)
	}

	p := NewProjector(s, l, zerolog.Nop())
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); p.Run(runCtx) }()
	defer func() { cancel(); <-stopped }()
	eventlogtest.WaitFor(t, 10*time.Second, "the follow loop to merge the runs", func() bool { return !s.RunsLeft() })
	cancel()
	<-stopped
	if tabled, runs := depositsWhere(t, s); runs != 0 || tabled == 0 {
		t.Fatalf("the follow loop left %d runs (%d deposit blocks in the table)", runs, tabled)
	}
	if got := mustDump(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("deposits after the merge:\n%v\nwant\n%v", got["deposits"], want["deposits"])
	}
	d, err := s.Deposit(partner, late.Trace)
	if err != nil || !d.Credited || !d.Announced {
		t.Fatalf("the last deposit after the merge: %+v, %v; want credited and announced", d, err)
	}
}

// A merge that fails (a run's block holds bytes that are not entries) does
// not stop the follow loop: it goes on applying, and the runs stay.
func TestAMergeThatFailsLeavesTheRunsAndTheLoopApplying(t *testing.T) {
	ctx := context.Background()
	l := filledLedger(t, depositEvents(t, 20, 2, false, numberedTrace))
	path := filepath.Join(t.TempDir(), "built.db")
	built := buildInSpans(t, l, path, 7)
	if err := built.db.Update(func(tx *bolt.Tx) error {
		run := tx.Bucket(bucketDepositRuns).Bucket(binary.BigEndian.AppendUint64(nil, 1))
		k, _ := run.Cursor().First()
		return run.Put(k, []byte{0xff, 0xff})
	}); err != nil {
		t.Fatal(err)
	}
	if err := built.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.Fill(ctx, l, depositEvents(t, 3, 1, false, scatteredTrace)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := NewProjector(s, l, zerolog.Nop())
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); p.Run(runCtx) }()
	defer func() { cancel(); <-stopped }()
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	if err := s.WaitFor(wait, lastSeq(t, l)); err != nil {
		t.Fatalf("the loop stopped applying: %v", err)
	}
	if _, runs := depositsWhere(t, s); runs == 0 || !s.RunsLeft() {
		t.Fatalf("%d runs left (RunsLeft %v) after a merge that cannot read one", runs, s.RunsLeft())
	}
}
