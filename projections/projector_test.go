package projections_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/projections"
)

// Rebuild swaps the file in while the follow loop runs. The loop must yield
// to the swap every time: it once could take its lock back first and leave
// Rebuild (and `giving replay`) waiting forever.
func TestRebuildWhileFollowing(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	store, err := projections.Open(filepath.Join(t.TempDir(), "projections.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := projections.NewProjector(store, l, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.Run(ctx)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	partner := domain.NewID(domain.PrefixPartner)
	var last uint64
	for i := range 20 {
		dep := domain.NewID(domain.PrefixDeposit)
		ev := domain.NewEvent(partner, dep, domain.NewID(domain.PrefixChurch), time.Now(), &domain.DepositReceived{
			DepositID: dep, Amount: domain.Hundredths(100 + i), Currency: "USD", Trace: "t", BankTS: domain.FormatTime(time.Now()),
		})
		app, err := l.Append(ctx, ev, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		last = app.Record.Seq
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		err = p.Rebuild(rctx, nil)
		rcancel()
		if err != nil {
			t.Fatalf("rebuild %d: %v", i, err)
		}
		if store.Applied() != last {
			t.Fatalf("rebuild %d: applied %d, want %d", i, store.Applied(), last)
		}
	}
	// The loop still follows after the swaps.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	dep := domain.NewID(domain.PrefixDeposit)
	app, err := l.Append(ctx, domain.NewEvent(partner, dep, "", time.Now(), &domain.DepositReceived{DepositID: dep, Amount: 1, Currency: "USD"}), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WaitFor(wctx, app.Record.Seq); err != nil {
		t.Fatalf("after the rebuilds the loop no longer follows: %v", err)
	}
}
