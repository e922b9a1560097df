package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

func createPartner(t *testing.T, l *eventlog.Ledger, name string) string {
	t.Helper()
	id := domain.NewID(domain.PrefixPartner)
	out, err := l.Execute(context.Background(), eventlog.Command{
		Partner: id, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			var p domain.Partner
			for _, e := range h.Events {
				p.Apply(e)
			}
			ev, err := domain.CreatePartner(&p, id, name, domain.Sandbox, []string{"https://example.org"}, domain.Brand{}, time.Now())
			return &ev, err
		},
	})
	if err != nil || out.Record == nil {
		t.Fatalf("create partner: %v", err)
	}
	return id
}

// keyIssued is a new API key's event on the partner's aggregate, as
// appended without a command (an internal event).
func keyIssued(partner string) domain.Event {
	key := domain.GenerateKey(domain.Sandbox)
	return domain.NewEvent(partner, partner, "", time.Now(), &domain.KeyIssued{KeyID: key.ID, Prefix: key.Prefix, Hash: key.Hash})
}

// credited is a deposit credited to a new church of the partner: a public
// event, under trace, of amount hundredths.
func credited(t *testing.T, partner, trace string, amount domain.Hundredths) domain.Event {
	t.Helper()
	now := time.Now()
	ev, err := domain.ReconcileCredit(domain.Deposit{}, domain.Credit{
		PartnerID: partner, ChurchID: domain.NewID(domain.PrefixChurch), Trace: trace,
		AccountRef: "acct_test", Amount: amount, BankTS: now,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	return *ev
}

func TestAppendDetectsConflictAndDuplicates(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")

	ev := keyIssued(pt)
	// The aggregate already holds partner.created at sequence 1, so
	// expecting an empty aggregate must conflict.
	if _, err := l.Append(ctx, ev, "k1", 0); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append with stale expectation: got %v, want ErrConflict", err)
	}
	first, err := l.Append(ctx, ev, "k1", 1)
	if err != nil || first.Duplicate {
		t.Fatalf("append: %+v %v", first, err)
	}
	again, err := l.Append(ctx, ev, "k1", first.Record.Seq)
	if err != nil {
		t.Fatalf("re-append: %v", err)
	}
	if !again.Duplicate || again.Record.Seq != first.Record.Seq || string(again.Record.Data) != string(first.Record.Data) {
		t.Fatalf("duplicate append: got %+v, want the first record %+v", again, first)
	}
}

func TestExecuteSerialisesConcurrentCommands(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")

	const n = 20
	issueKeysConcurrently(t, pt, n, l)
	recs, pending, err := l.Read(ctx, l.Subjects().Aggregate(pt, pt), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n+1 || pending != 0 {
		t.Fatalf("aggregate holds %d events (%d pending), want %d", len(recs), pending, n+1)
	}
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Fatalf("records out of order at %d", i)
		}
	}
}

func TestReadFiltersByPartnerServerSide(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	a := createPartner(t, l, "A")
	b := createPartner(t, l, "B")
	recs, _, err := l.Read(ctx, l.Subjects().Aggregate(b, b), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Partner != b || recs[0].Type != "partner.created" {
		t.Fatalf("read for partner B returned %+v", recs)
	}
	if last, err := l.LastOf(ctx, l.Subjects().Aggregate(a, a)); err != nil || last != 1 {
		t.Fatalf("last of A = %d, %v; want 1", last, err)
	}
	if last, err := l.LastOf(ctx, l.Subjects().Aggregate("pt_none", "pt_none")); err != nil || last != 0 {
		t.Fatalf("last of unknown = %d, %v; want 0", last, err)
	}
}

// ScanSince starts at the first matching event stored at or after a time,
// found by the server, and reads on from there like Read.
func TestScanSinceStartsAtATime(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	a := createPartner(t, l, "A")
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	time.Sleep(20 * time.Millisecond)
	b := createPartner(t, l, "B")
	c := createPartner(t, l, "C")
	filter := l.Subjects().OfType("partner.created")
	recs, pending, err := l.ScanSince(ctx, filter, since, 1)
	if err != nil || len(recs) != 1 || recs[0].Partner != b || pending != 1 {
		t.Fatalf("read since between A and B: %+v, %d pending, %v; want B and one more", recs, pending, err)
	}
	if recs, _, err := l.ScanSince(ctx, filter, since.Add(-time.Hour), 10); err != nil || len(recs) != 3 || recs[0].Partner != a || recs[2].Partner != c {
		t.Fatalf("read since an hour ago: %+v, %v; want A, B and C", recs, err)
	}
	if recs, pending, err := l.ScanSince(ctx, filter, time.Now().Add(time.Minute), 10); err != nil || len(recs) != 0 || pending != 0 {
		t.Fatalf("read since a minute from now: %+v, %d, %v; want nothing", recs, pending, err)
	}
}

// A scan across every partner goes over the ledger's second connection, and
// a read of one aggregate over the first, with the appends: the server
// answers a connection's requests one after another, and a scan, which
// walks its whole subject index, must not hold up the writes behind it.
func TestScansGoOverAConnectionOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	a := createPartner(t, l, "A")
	before, err := l.RequestsByConnectionForTest()
	if err != nil {
		t.Fatal(err)
	}
	if recs, _, err := l.Scan(ctx, l.Subjects().OfType("partner.created"), 0, 10); err != nil || len(recs) != 1 || recs[0].Partner != a {
		t.Fatalf("scan: %+v, %v; want A", recs, err)
	}
	afterScan, err := l.RequestsByConnectionForTest()
	if err != nil {
		t.Fatal(err)
	}
	if recs, _, err := l.Read(ctx, l.Subjects().Aggregate(a, a), 0, 10); err != nil || len(recs) != 1 {
		t.Fatalf("read: %+v, %v; want A's event", recs, err)
	}
	afterRead, err := l.RequestsByConnectionForTest()
	if err != nil {
		t.Fatal(err)
	}
	const main, scans = "giving", "giving scans"
	if len(before) != 2 || afterScan[scans] != before[scans]+1 || afterScan[main] != before[main] {
		t.Fatalf("a scan: requests by connection %v, then %v; want one more on %q only", before, afterScan, scans)
	}
	if afterRead[main] != afterScan[main]+1 || afterRead[scans] != afterScan[scans] {
		t.Fatalf("a read: requests by connection %v, then %v; want one more on %q only", afterScan, afterRead, main)
	}
}

// Two connections to one ledger stand for two instances: their commands on
// one aggregate conflict for real, and each loser reloads and decides again.
func TestExecuteAcrossInstancesRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	first, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir(), NATSListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, NATSURL: first.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	pt := createPartner(t, first, "Acme")

	const n = 12
	issueKeysConcurrently(t, pt, n, first, second)
	recs, _, err := first.Read(ctx, first.Subjects().Aggregate(pt, pt), 0, 100)
	if err != nil || len(recs) != 2*n+1 {
		t.Fatalf("aggregate holds %d events, want %d (%v)", len(recs), 2*n+1, err)
	}
}

// issueKeysConcurrently issues n keys to partner pt through each ledger at
// once, every command racing the others on the same aggregate, and fails
// the test if any command fails.
func issueKeysConcurrently(t *testing.T, pt string, n int, ledgers ...*eventlog.Ledger) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n*len(ledgers))
	for li, l := range ledgers {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.Execute(context.Background(), eventlog.Command{
					Partner: pt, Aggregate: pt, MsgID: fmt.Sprintf("issue-%d-%d", li, i),
					Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
						var p domain.Partner
						for _, e := range h.Events {
							p.Apply(e)
						}
						ev, err := domain.IssueKey(&p, domain.GenerateKey(domain.Sandbox), time.Now())
						return &ev, err
					},
				})
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("execute: %v", err)
		}
	}
}

// A command for a new aggregate decides first from an empty history without
// reading the ledger; if the id did exist, the append's expectation of an
// empty aggregate conflicts and the next attempt decides from the real one.
func TestANewAggregateDecidesWithoutLoadingAndAnExistingOneReloads(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")

	var seen []int
	out, err := l.Execute(ctx, eventlog.Command{
		Partner: pt, Aggregate: pt, New: true,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			seen = append(seen, len(h.Events))
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.CreatePartner(&p, pt, "Acme again", domain.Sandbox, []string{"https://example.org"}, domain.Brand{}, time.Now())
			return &ev, err
		},
	})
	if err == nil || out.Record != nil {
		t.Fatalf("creating an existing partner: %+v, %v; want the domain's refusal", out, err)
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 1 {
		t.Fatalf("histories seen: %v, want an empty one, then the partner's 1 event", seen)
	}
	recs, _, err := l.Read(ctx, l.Subjects().Aggregate(pt, pt), 0, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("aggregate holds %d events (%v), want only partner.created", len(recs), err)
	}

	seen = nil
	fresh := domain.NewID(domain.PrefixPartner)
	out, err = l.Execute(ctx, eventlog.Command{
		Partner: fresh, Aggregate: fresh, New: true,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			seen = append(seen, len(h.Events))
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.CreatePartner(&p, fresh, "Fresh", domain.Sandbox, []string{"https://example.org"}, domain.Brand{}, time.Now())
			return &ev, err
		},
	})
	if err != nil || out.Record == nil || len(seen) != 1 {
		t.Fatalf("creating a new partner: %+v, %v, decided %d times; want one decision and the event", out, err, len(seen))
	}
}

// A direct get nobody answers yet (on a cluster: no replica serves the
// stream's direct gets right after it is created) is asked again for a
// moment; one that stays unanswered fails as unavailable, not as a fault.
func TestADirectGetNobodyAnswersIsAskedAgainThenUnavailable(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	js := l.JetStream()

	if _, err := l.DirectLastForTest(ctx, "NO_SUCH_STREAM", "none.>"); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a get nobody answers: %v, want unavailable", err)
	}

	created := make(chan error, 1)
	time.AfterFunc(50*time.Millisecond, func() {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}, AllowDirect: true})
		if err == nil {
			_, err = js.Publish(ctx, "late.one", []byte("here"))
		}
		created <- err
	})
	n, err := l.DirectLastForTest(ctx, "LATE", "late.>")
	if cerr := <-created; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || n != 1 {
		t.Fatalf("a get asked before its stream existed: %d messages, %v; want the one published once it did", n, err)
	}
}
