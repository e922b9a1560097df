package projections

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/eventlog/probe"
)

// A follow loop that starts far behind the ledger (a file discarded after
// the machine went down, an instance stopped while others wrote) catches
// up in a few spanning transactions, as a rebuild does, releasing waiters
// as it commits; then applies what comes next a batch at a time; and its
// file holds what a rebuild's does.
func TestFarBehindFollowCatchesUpInSpans(t *testing.T) {
	ctx := context.Background()
	behind := 2*catchUpSpan + spanCatchUpAt
	l := filledLedger(t, depositEvents(t, behind, 40, false, numberedTrace))
	last := lastSeq(t, l)
	store, err := Open(filepath.Join(t.TempDir(), "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	commits := func() uint64 {
		var id int
		if err := store.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return uint64(id)
	}
	before := commits()
	waited := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		waited <- store.WaitFor(wctx, last/2)
	}()

	p := NewProjector(store, l, zerolog.Nop())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(runCtx)
	}()
	defer func() { stop(); <-done }()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := store.WaitFor(wctx, last); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("a waiter half way: %v", err)
	}
	// Spans of catchUpSpan events, and the rest; a transaction a batch
	// would have made dozens of commits.
	if n := commits() - before; n > 4 {
		t.Fatalf("caught up %d events in %d commits, want at most 4", last, n)
	}

	// What comes next is applied as it comes, not held for a span.
	more, err := probe.Fill(ctx, l, depositEvents(t, 3, 2, false, numberedTrace))
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range more {
		if err := store.WaitFor(wctx, seq); err != nil {
			t.Fatal(err)
		}
	}

	if got, want := mustDump(t, store), rebuiltDump(t, l); !reflect.DeepEqual(got, want) {
		t.Fatal("the file caught up in spans differs from a rebuild's")
	}
}
