package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ---- The ledger: reading it, and producing partner events ----

// ledgerEvents reads every event of one type from the ledger.
func ledgerEvents(t *testing.T, l *eventlog.Ledger, eventType string) []domain.Event {
	t.Helper()
	var out []domain.Event
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().OfType(eventType), after, 500)
		if err != nil {
			t.Fatalf("read ledger: %v", err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			out = append(out, ev)
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}

// sessionEvents counts one session's events of one type.
func sessionEvents(t *testing.T, l *eventlog.Ledger, sessionID, eventType string) int {
	t.Helper()
	n := 0
	for _, ev := range ledgerEvents(t, l, eventType) {
		if ev.AggregateID == sessionID {
			n++
		}
	}
	return n
}

// imports returns every church.imported event of the partner, oldest first.
func imports(t *testing.T, l *eventlog.Ledger, partner string) []*domain.ChurchesImported {
	t.Helper()
	var out []*domain.ChurchesImported
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().Aggregate(partner, domain.ChurchCatalogue), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := ev.Payload.(*domain.ChurchesImported); ok {
				out = append(out, p)
			}
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}

// Tests append public events the way the donor flow and the vendor edges
// do: through the command helper (eventlog.Execute) with the domain's
// decisions, without going through HTTP.

// createEnrollment appends enrollment.created for a new enrollment.
func createEnrollment(ctx context.Context, l *eventlog.Ledger, partner, church string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixEnrollment)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		e := domain.Fold[domain.Enrollment](h.Events)
		ev, err := domain.CreateEnrollment(&e, domain.NewEnrollment{
			ID: id, PartnerID: partner, ChurchID: church, SessionID: domain.NewID(domain.PrefixSession),
			Giving: domain.Giving{Mode: domain.ModePercent, Value: 2_50},
		}, time.Now())
		if err != nil {
			return nil, err
		}
		return &ev, nil
	})
}

// activateEnrollment appends enrollment.activated for an enrollment created
// by createEnrollment.
func activateEnrollment(ctx context.Context, l *eventlog.Ledger, partner, enrollment string) (eventlog.Record, error) {
	return execute(ctx, l, partner, enrollment, func(h eventlog.History) (*domain.Event, error) {
		e := domain.Fold[domain.Enrollment](h.Events)
		return domain.ActivateEnrollment(&e, time.Now())
	})
}

// receiveDeposit appends deposit.received for a new deposit.
func receiveDeposit(ctx context.Context, l *eventlog.Ledger, partner, church string, amount domain.Hundredths, trace string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixDeposit)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		if len(h.Events) > 0 {
			return nil, domain.ProblemConflict.New("deposit %s already received", id)
		}
		now := time.Now()
		ev := domain.NewEvent(partner, id, church, now, &domain.DepositReceived{
			DepositID: id, Amount: amount, Currency: "USD", Trace: trace, BankTS: domain.FormatTime(now),
		})
		return &ev, nil
	})
}

func execute(ctx context.Context, l *eventlog.Ledger, partner, aggregate string, decide func(eventlog.History) (*domain.Event, error)) (eventlog.Record, error) {
	out, err := l.Execute(ctx, eventlog.Command{
		Partner: partner, Aggregate: aggregate,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) { return decide(h) },
	})
	if err != nil {
		return eventlog.Record{}, err
	}
	if out.Record == nil {
		return eventlog.Record{}, fmt.Errorf("%s/%s: nothing appended", partner, aggregate)
	}
	return *out.Record, nil
}

// appendEnrollment appends an enrollment.created event for partner, naming
// a church of no one, and returns the stored record, its event id and when
// the append began.
func appendEnrollment(t testing.TB, l *eventlog.Ledger, partner string) (eventlog.Record, string, time.Time) {
	t.Helper()
	start := time.Now()
	rec, err := createEnrollment(context.Background(), l, partner, domain.NewID(domain.PrefixChurch))
	if err != nil {
		t.Fatalf("append enrollment: %v", err)
	}
	ev, err := rec.Event()
	if err != nil {
		t.Fatalf("decode appended event: %v", err)
	}
	return rec, ev.ID, start
}

// feedProducer is one partner's identity for producing events: its id and
// the churches its events name.
type feedProducer struct {
	Partner  string
	Churches []string
}

// job kinds for produce: what one unit of work appends.
const (
	jobCreate         = iota // enrollment.created
	jobCreateActivate        // enrollment.created, then enrollment.activated
	jobDeposit               // deposit.received
)

type produceJob struct {
	who  feedProducer
	kind int
	n    int // the job's number, to vary churches and amounts
}

// produce runs jobs on parallel workers (synced JetStream appends are
// latency-bound, so concurrency is what makes thousands of them quick) and
// returns every appended record, in stream order.
func produce(ctx context.Context, l *eventlog.Ledger, jobs []produceJob, workers int) ([]eventlog.Record, error) {
	var (
		mu       sync.Mutex
		out      []eventlog.Record
		firstErr error
		wg       sync.WaitGroup
	)
	ch := make(chan produceJob)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				recs, err := runJob(ctx, l, j)
				mu.Lock()
				out = append(out, recs...)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	sort.Slice(out, func(i, k int) bool { return out[i].Seq < out[k].Seq })
	return out, firstErr
}

func runJob(ctx context.Context, l *eventlog.Ledger, j produceJob) ([]eventlog.Record, error) {
	church := j.who.Churches[j.n%len(j.who.Churches)]
	switch j.kind {
	case jobDeposit:
		rec, err := receiveDeposit(ctx, l, j.who.Partner, church, domain.Hundredths(100+j.n), fmt.Sprintf("trace-%d", j.n))
		return []eventlog.Record{rec}, err
	case jobCreate, jobCreateActivate:
		created, err := createEnrollment(ctx, l, j.who.Partner, church)
		if err != nil || j.kind == jobCreate {
			return []eventlog.Record{created}, err
		}
		activated, err := activateEnrollment(ctx, l, j.who.Partner, created.Aggregate)
		return []eventlog.Record{created, activated}, err
	}
	return nil, fmt.Errorf("unknown job kind %d", j.kind)
}
