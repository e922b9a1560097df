package projections

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A file build writes each span's deposits as a run and merges the runs
// into the deposits table at the end, into the file a live projector makes.
// The ledger holds deposits as ledgers written before the deposit book did
// (a credit, then its announcement, read back in the next span when they
// fall in two) and as the service records them now, with traces in no
// order of the ledger's; spans of 9 events and a
// merge of 5 deposits a transaction put a trace in two runs and resume the
// merge a dozen times.
func TestABuildsDepositRunsMergeIntoTheTable(t *testing.T) {
	ctx := context.Background()
	l := filledLedger(t, append(depositEvents(t, 30, 4, true, numberedTrace), depositEvents(t, 30, 3, false, scatteredTrace)...))
	total := lastSeq(t, l)
	dir := t.TempDir()
	s, err := openRebuild(filepath.Join(dir, "built.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := func(last uint64) bool { return last >= total }
	span := s.newTxSpan(7)
	if err := followInto(ctx, l, s.startPipelineEnding(span.apply, span.end, span.flush, nil, rebuildDepth), 3, stop); err != nil {
		t.Fatal(err)
	}
	var tabled, runs int
	if err := s.view(func(tx *bolt.Tx) error {
		tabled = tx.Bucket(bucketDeposits).Stats().KeyN
		if b := tx.Bucket(bucketDepositRuns); b != nil {
			runs = b.Stats().BucketN - 1
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if tabled != 0 || runs < int(total)/9 {
		t.Fatalf("before the merge: %d deposits in the table, %d runs; want none and a run a span", tabled, runs)
	}
	if err := mergeDepositRuns(s.db, 5); err != nil {
		t.Fatal(err)
	}
	got, want := mustDump(t, s), appliedDump(t, l)
	if _, ok := got[string(bucketDepositRuns)]; ok {
		t.Fatal("the runs are still in the file after the merge")
	}
	if len(got["deposits"]) != 60 || !reflect.DeepEqual(got, want) {
		t.Fatalf("built file (%d deposits) differs from one applied a transaction a batch:\n%v\nwant\n%v", len(got["deposits"]), got["deposits"], want["deposits"])
	}
}
