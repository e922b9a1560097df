package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// BenchmarkFeedPage reads one page of GET /v1/events from the middle of a
// partner's events (3,000 commands, about 4,000 events), on three ledgers:
//
//   - alone: only that partner's events;
//   - before: 150,000 events of other partners first, then ours;
//   - interleaved: the same 150,000 spread between ours, 50 of theirs
//     between two of our commands.
//
// Each ledger is read over HTTP (the whole request: authentication, rate
// limit, read, encoding) and with Ledger.Read alone. The time per page should
// follow the page size; the size of the stream should not matter (alone vs
// before), and other partners' events matter only where they sit between the
// page's own (interleaved), because the server steps over them.
//
// The ledger runs on a separate in-process nats-server without per-write
// fsync, only so that building 150,000 events takes seconds; reads do not
// depend on it. -short builds smaller ledgers.
func BenchmarkFeedPage(b *testing.B) {
	ours, othersPerOurs := 3000, 50
	if testing.Short() {
		ours, othersPerOurs = 2400, 10
	}
	others := ours * othersPerOurs
	layouts := []struct {
		name          string
		before, among int
	}{
		{"alone", 0, 0},
		{fmt.Sprintf("before=%d", others), others, 0},
		{fmt.Sprintf("interleaved=%d", others), 0, othersPerOurs},
	}
	for _, lg := range layouts {
		ts := startStack(b, withNATSURL(eventlogtest.StartServer(b)))
		c, p := ts.feedPartner(b, 3)
		start := time.Now()
		strangers := []string{domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner)}
		fillFeedLedger(b, lg.before, func(ctx context.Context, i int) (uint64, error) {
			return 0, appendStrangers(ctx, ts.Ledger, strangers, 1)
		})
		mid := fillFeedLedger(b, ours, func(ctx context.Context, i int) (uint64, error) {
			if err := appendStrangers(ctx, ts.Ledger, strangers, lg.among); err != nil {
				return 0, err
			}
			recs, err := runJob(ctx, ts.Ledger, produceJob{who: p, kind: []int{jobCreate, jobDeposit, jobCreateActivate}[i%3], n: i})
			if err != nil || i != ours/2 {
				return 0, err
			}
			return recs[0].Seq, nil
		})
		last, _ := ts.Ledger.LastSeq(context.Background())
		b.Logf("%s: built %d events in %s", lg.name, last, time.Since(start).Round(time.Millisecond))
		cursor := domain.NewCursors(ts.Secrets.Key("cursor")).EncodeSeq(domain.CursorEvents, p.Partner, mid)

		for _, limit := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/ledger-read/limit=%d", lg.name, limit), func(b *testing.B) {
				filter := ts.Ledger.Subjects().Public(p.Partner, "")
				for b.Loop() {
					recs, _, err := ts.Ledger.Read(context.Background(), filter, mid, limit+1)
					if err != nil || len(recs) != limit+1 {
						b.Fatalf("read: %d events, %v", len(recs), err)
					}
				}
			})
		}
		cases := []struct {
			name  string
			query url.Values
		}{
			{"limit=10", url.Values{"limit": {"10"}}},
			{"limit=100", url.Values{"limit": {"100"}}},
			{"limit=1000", url.Values{"limit": {"1000"}}},
			{"limit=100/type=one", url.Values{"limit": {"100"}, "type": {"deposit.received"}}},
			{"limit=100/type=two", url.Values{"limit": {"100"}, "type": {"deposit.received,enrollment.created"}}},
		}
		for _, cs := range cases {
			q := cs.query
			q.Set("since_cursor", cursor)
			// One checked request: the page is valid and full.
			if page := getEvents(b, c, q); !page.HasMore {
				b.Fatalf("%s %s: page not full", lg.name, cs.name)
			}
			target := ts.URL + "/v1/events?" + q.Encode()
			b.Run(lg.name+"/http/"+cs.name, func(b *testing.B) {
				req, _ := http.NewRequest(http.MethodGet, target, nil)
				req.Header.Set("Authorization", "Bearer "+c.Key)
				var bytes int64
				for b.Loop() {
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
					bytes += n
				}
				b.SetBytes(bytes / int64(b.N))
			})
		}
	}
}

// fillFeedLedger runs n units of work on parallel workers and returns the
// non-zero sequence one of them reported.
func fillFeedLedger(b *testing.B, n int, unit func(ctx context.Context, i int) (uint64, error)) uint64 {
	b.Helper()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		seq      uint64
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s, err := unit(ctx, i)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if s != 0 {
					seq = s
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return seq
}

// appendStrangers appends n deposits of other partners.
func appendStrangers(ctx context.Context, l *eventlog.Ledger, strangers []string, n int) error {
	for k := range n {
		dep := domain.NewID(domain.PrefixDeposit)
		ev := domain.NewEvent(strangers[k%len(strangers)], dep, domain.NewID(domain.PrefixChurch), time.Now(), &domain.DepositReceived{
			DepositID: dep, Amount: 1_00, Currency: "USD", Trace: "other", BankTS: domain.FormatTime(time.Now()),
		})
		if _, err := l.Append(ctx, ev, "", 0); err != nil {
			return err
		}
	}
	return nil
}
