package projections_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/projections"
)

// workload appends a mix of partner, key and church events straight to the
// ledger through the command helper.
func workload(t *testing.T, l *eventlog.Ledger, round int) {
	t.Helper()
	ctx := context.Background()
	partner := func(h eventlog.History) domain.Partner {
		var p domain.Partner
		for _, e := range h.Events {
			p.Apply(e)
		}
		return p
	}
	for i := range 3 {
		id := domain.NewID(domain.PrefixPartner)
		run := func(decide func(h eventlog.History) (*domain.Event, error)) {
			t.Helper()
			if _, err := l.Execute(ctx, eventlog.Command{Partner: id, Aggregate: id, Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) { return decide(h) }}); err != nil {
				t.Fatal(err)
			}
		}
		run(func(h eventlog.History) (*domain.Event, error) {
			p := partner(h)
			ev, err := domain.CreatePartner(&p, id, fmt.Sprintf("P%d-%d", round, i), domain.Sandbox, []string{"https://p.example"}, domain.Brand{}, time.Now())
			return &ev, err
		})
		keys := []domain.NewKey{domain.GenerateKey(domain.Sandbox), domain.GenerateKey(domain.Sandbox)}
		for _, k := range keys {
			run(func(h eventlog.History) (*domain.Event, error) {
				p := partner(h)
				ev, err := domain.IssueKey(&p, k, time.Now())
				return &ev, err
			})
		}
		run(func(h eventlog.History) (*domain.Event, error) {
			p := partner(h)
			ev, err := domain.RevokeKey(&p, keys[0].ID, time.Now())
			return &ev, err
		})
		ext := fmt.Sprintf("ext-%d", round)
		rows := []domain.ImportRow{{Name: "Grace", ExternalID: &ext}, {Name: " "}, {Name: "Hope"}}
		if _, err := l.Execute(ctx, eventlog.Command{Partner: id, Aggregate: domain.ChurchCatalogue, Decide: func(context.Context, eventlog.History) (*domain.Event, error) {
			ev, _, err := domain.ImportChurches(id, rows, func(string) bool { return false }, time.Now())
			return ev, err
		}}); err != nil {
			t.Fatal(err)
		}
	}
}

func openStore(t *testing.T, path string) *projections.Store {
	t.Helper()
	s, err := projections.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dump(t *testing.T, s *projections.Store) map[string]map[string]string {
	t.Helper()
	d, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runProjector follows the ledger into store until the returned stop is
// called.
func runProjector(t *testing.T, l *eventlog.Ledger, store *projections.Store) (*projections.Projector, func()) {
	t.Helper()
	p := projections.NewProjector(store, l, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return p, func() { cancel(); <-done }
}

func catchUp(t *testing.T, p *projections.Projector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRebuiltFileEqualsLiveAndRestartResumes(t *testing.T) {
	dir := t.TempDir()
	l := eventlogtest.Open(t, domain.Sandbox)
	live := filepath.Join(dir, "live.db")

	store := openStore(t, live)
	p, stop := runProjector(t, l, store)
	workload(t, l, 1)
	catchUp(t, p)
	stop()
	checkpoint := store.Applied()
	before := dump(t, store)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// More happens while the projector is down.
	workload(t, l, 2)

	store = openStore(t, live)
	defer store.Close()
	if store.Applied() != checkpoint {
		t.Fatalf("reopened checkpoint %d, want %d", store.Applied(), checkpoint)
	}
	if !reflect.DeepEqual(dump(t, store), before) {
		t.Fatal("reopened file differs from what was closed")
	}
	p, stop = runProjector(t, l, store)
	catchUp(t, p)
	stop()
	last, err := l.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if store.Applied() != last {
		t.Fatalf("applied %d, ledger at %d", store.Applied(), last)
	}

	// A file built from sequence 1 holds exactly the same read models. A
	// double-applied key issuance would show up here as a repeated key.
	rebuilt := filepath.Join(dir, "rebuilt.db")
	var reported uint64
	if err := projections.BuildFile(context.Background(), l, rebuilt, func(applied, total uint64) { reported = applied }); err != nil {
		t.Fatal(err)
	}
	if reported != last {
		t.Fatalf("progress ended at %d, want %d", reported, last)
	}
	fresh := openStore(t, rebuilt)
	defer fresh.Close()
	if got, want := dump(t, store), dump(t, fresh); !reflect.DeepEqual(got, want) {
		t.Fatalf("live projections differ from a fresh replay\nlive:    %v\nrebuilt: %v", got, want)
	}
	if len(dump(t, fresh)["churches"]) != 12 {
		t.Fatalf("churches: %d, want 12", len(dump(t, fresh)["churches"]))
	}
}

func TestApplySkipsSeenEventsAndRefusesGaps(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	workload(t, l, 1)
	recs, _, err := l.Read(context.Background(), l.Subjects().All(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	store := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	defer store.Close()
	if err := store.Apply(recs[:5]); err != nil {
		t.Fatal(err)
	}
	once := dump(t, store)
	// Redelivery of applied events changes nothing.
	if err := store.Apply(recs[:5]); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dump(t, store), once) || store.Applied() != recs[4].Seq {
		t.Fatal("re-applying seen events changed the store")
	}
	// Skipping an event would lose it: refused, and nothing moves.
	if err := store.Apply(recs[6:8]); err == nil {
		t.Fatal("a gap in the ledger was applied")
	}
	if store.Applied() != recs[4].Seq || !reflect.DeepEqual(dump(t, store), once) {
		t.Fatal("a refused batch changed the store")
	}
	// Overlapping batches apply only the new part.
	if err := store.Apply(recs[3:]); err != nil {
		t.Fatal(err)
	}
	if store.Applied() != recs[len(recs)-1].Seq {
		t.Fatalf("applied %d", store.Applied())
	}
}

func TestWaitForSeesProgress(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	store := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	defer store.Close()
	_, stop := runProjector(t, l, store)
	defer stop()
	workload(t, l, 1)
	last, _ := l.LastSeq(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	// Waiting for what does not exist yet ends with the context.
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := store.WaitFor(short, last+100); err == nil {
		t.Fatal("waited for a future sequence without error")
	}
}

// Rebuild must get the file from a follow loop that is idle (no new events)
// and leave the loop following the new file.
func TestRebuildWhileFollowing(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	store := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	defer store.Close()
	p, stop := runProjector(t, l, store)
	defer stop()
	workload(t, l, 1)
	catchUp(t, p)
	before := dump(t, store)

	for round := range 3 {
		done := make(chan error, 1)
		go func() { done <- p.Rebuild(context.Background(), nil) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: rebuild still waiting for the follow loop after 30s", round)
		}
	}
	if !reflect.DeepEqual(dump(t, store), before) {
		t.Fatal("rebuilt file differs")
	}
	workload(t, l, 2)
	catchUp(t, p)
	if len(dump(t, store)["churches"]) != 12 {
		t.Fatal("the loop does not follow the swapped file")
	}
}

// A rebuild whose context ends (the instance is stopping) gives up cleanly:
// no half-built file is left, the live file is unchanged and still followed.
func TestRebuildAbandonedOnCancel(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	path := filepath.Join(t.TempDir(), "p.db")
	store := openStore(t, path)
	defer store.Close()
	p, stop := runProjector(t, l, store)
	defer stop()
	workload(t, l, 1)
	catchUp(t, p)
	before := dump(t, store)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	midway, cancelMidway := context.WithCancel(context.Background())
	defer cancelMidway()
	for name, tc := range map[string]struct {
		ctx      context.Context
		progress projections.Progress
	}{
		"before it starts": {cancelled, nil},
		"while it builds":  {midway, func(uint64, uint64) { cancelMidway() }},
	} {
		err := p.Rebuild(tc.ctx, tc.progress)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: rebuild returned %v, want context.Canceled", name, err)
		}
		if _, err := os.Stat(path + ".rebuild"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the abandoned rebuild left its file behind (%v)", name, err)
		}
		if !reflect.DeepEqual(dump(t, store), before) {
			t.Fatalf("%s: the abandoned rebuild changed the live file", name)
		}
	}
	workload(t, l, 2)
	catchUp(t, p)
	if len(dump(t, store)["churches"]) != 12 {
		t.Fatal("the loop does not follow the live file after an abandoned rebuild")
	}
}

// The projections keep the dedup ids a retried request looks its earlier
// run's event up by (idempotency.IsRequestMsgID), live and rebuilt, and no
// other: a vendor event's id is only ever checked by the ledger's dedup.
func TestOnlyRequestDedupIDsAreKept(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	create := func(msgID string) uint64 {
		t.Helper()
		id := domain.NewID(domain.PrefixPartner)
		out, err := l.Execute(ctx, eventlog.Command{Partner: id, Aggregate: id, New: true, MsgID: msgID,
			Decide: func(context.Context, eventlog.History) (*domain.Event, error) {
				var p domain.Partner
				ev, err := domain.CreatePartner(&p, id, "P "+msgID, domain.Sandbox, []string{"https://p.example"}, domain.Brand{}, time.Now())
				return &ev, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Record.Seq
	}
	const request, vendor = "idem:0123456789abcdef:0", "bank:evt_1:0"
	if !idempotency.IsRequestMsgID(request) || idempotency.IsRequestMsgID(vendor) {
		t.Fatalf("IsRequestMsgID: %q and %q misjudged", request, vendor)
	}
	requestSeq := create(request)
	create(vendor)
	create("")

	live := openStore(t, filepath.Join(t.TempDir(), "live.db"))
	defer live.Close()
	p, stop := runProjector(t, l, live)
	defer stop()
	catchUp(t, p)
	rebuilt := filepath.Join(t.TempDir(), "rebuilt.db")
	if err := projections.BuildFile(ctx, l, rebuilt, nil); err != nil {
		t.Fatal(err)
	}
	fresh := openStore(t, rebuilt)
	defer fresh.Close()
	for name, s := range map[string]*projections.Store{"live": live, "rebuilt": fresh} {
		if seq, ok, err := s.CommandSeq(request); err != nil || !ok || seq != requestSeq {
			t.Errorf("%s: CommandSeq(%q) = %d, %v, %v; want %d", name, request, seq, ok, err, requestSeq)
		}
		if seq, ok, err := s.CommandSeq(vendor); err != nil || ok {
			t.Errorf("%s: CommandSeq(%q) = %d, %v, %v; want nothing kept", name, vendor, seq, ok, err)
		}
		if n := len(dump(t, s)["msg_ids"]); n != 1 {
			t.Errorf("%s: %d dedup ids kept, want 1", name, n)
		}
	}
}
