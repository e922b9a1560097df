package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// Test producers of partner events. Until the donor flow and the vendor
// edges land, tests append public events the way those will: through the
// command helper (eventlog.Execute) with the domain's decisions. None of this
// is reachable over HTTP.

// createEnrollment appends enrollment.created for a new enrollment.
func createEnrollment(ctx context.Context, l *eventlog.Ledger, partner, church string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixEnrollment)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		e := foldEnrollment(h)
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
		e := foldEnrollment(h)
		return domain.ActivateEnrollment(&e, time.Now())
	})
}

// receiveDeposit appends deposit.received for a new deposit.
func receiveDeposit(ctx context.Context, l *eventlog.Ledger, partner, church string, amount domain.Hundredths, trace string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixDeposit)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		if len(h.Events) > 0 {
			return nil, domain.Errorf(domain.KindConflict, "conflict", "deposit %s already received", id)
		}
		now := time.Now()
		ev := domain.NewEvent(partner, id, church, now, &domain.DepositReceived{
			DepositID: id, Amount: amount, Currency: "USD", Trace: trace, BankTS: domain.FormatTime(now),
		})
		return &ev, nil
	})
}

func foldEnrollment(h eventlog.History) domain.Enrollment {
	var e domain.Enrollment
	for _, ev := range h.Events {
		e.Apply(ev)
	}
	return e
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

// feedPartner onboards a partner with a few imported churches and returns
// its client and its producer identity.
func (ts *testStack) feedPartner(t testing.TB, churches int) (*apitest.Client, feedProducer) {
	t.Helper()
	c, pid := ts.partner(t)
	rows := make([]string, churches)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"name":"Church %d"}`, i)
	}
	resp := c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows, ",")+`]}`, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("import churches: %d %s", resp.Status, resp.Body)
	}
	var imp importResponse
	resp.JSON(t, &imp)
	p := feedProducer{Partner: pid}
	for _, r := range imp.Results {
		p.Churches = append(p.Churches, r.Church.ID)
	}
	return c, p
}

// Stacks on a shared, external ledger, for tests of several instances and
// for benchmarks that build large ledgers.

// withNATSURL runs the stack on an external NATS server instead of an
// embedded one.
func withNATSURL(url string) stackOption {
	return func(c *stackConfig) { c.Ledger.NATSURL = url }
}

// startUnsyncedNATS runs a separate nats-server with JetStream, standing in
// for a cluster that several instances share. It does not fsync each write,
// so benchmarks can build large ledgers quickly.
func startUnsyncedNATS(tb testing.TB) string {
	tb.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		JetStream: true, StoreDir: tb.TempDir(), Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready")
	}
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv.ClientURL()
}

// withMasterKey sets the master key, which instances sharing a ledger share.
func withMasterKey(hex string) stackOption {
	return func(c *stackConfig) { c.MasterKey = hex }
}
