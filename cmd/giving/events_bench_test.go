package main

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
)

// BenchmarkFeedPage reads one page of GET /v1/events from the middle of a
// partner's 4,000 events, over HTTP, on two ledgers: one holding only that
// partner's events, and one where they are spread through 150,000 events of
// other partners (50 of theirs between each two of our commands). The time per page should follow
// the page size and barely move with the other partners' traffic.
//
// The ledger runs on a separate in-process nats-server without per-write
// fsync, only so that building 150,000 events takes seconds; reads do not
// depend on it.
func BenchmarkFeedPage(b *testing.B) {
	ours, othersPerOurs := 3000, 50
	if testing.Short() {
		ours, othersPerOurs = 2400, 10
	}
	ledgers := []struct {
		name   string
		others int
	}{{"others=0", 0}, {fmt.Sprintf("others=%d", ours*othersPerOurs), ours * othersPerOurs}}
	for _, lg := range ledgers {
		ts := startStack(b, withNATSURL(startUnsyncedNATS(b)))
		c, p := ts.feedPartner(b, 3)
		start := time.Now()
		mid := fillFeedLedger(b, ts.ledger, p, ours, lg.others)
		b.Logf("%s: built %d events in %s", lg.name, ours+lg.others, time.Since(start).Round(time.Millisecond))
		cursor := eventlog.NewCursors(ts.secrets).EncodeSeq(eventlog.CursorEvents, p.Partner, mid)
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
		for _, limit := range []int{10, 100, 1000} {
			// The ledger read alone, without HTTP, authentication and rate
			// limiting: what the page costs the JetStream server and client.
			b.Run(fmt.Sprintf("%s/ledger-read/limit=%d", lg.name, limit), func(b *testing.B) {
				filter := ts.ledger.Subjects().Public(p.Partner, "")
				for b.Loop() {
					recs, _, err := ts.ledger.Read(context.Background(), filter, mid, limit+1)
					if err != nil || len(recs) != limit+1 {
						b.Fatalf("read: %d events, %v", len(recs), err)
					}
				}
			})
		}
		for _, cs := range cases {
			q := cs.query
			q.Set("since_cursor", cursor)
			target := ts.URL + "/v1/events?" + q.Encode()
			// One checked request: the page is valid and full.
			if p := getEvents(b, c, q); !p.HasMore {
				b.Fatalf("%s %s: page not full", lg.name, cs.name)
			}
			b.Run(lg.name+"/"+cs.name, func(b *testing.B) {
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

// fillFeedLedger runs ours commands for p (created, activated and deposits
// in turn) spread evenly through others events of other partners, and
// returns the sequence of the middle one of ours.
func fillFeedLedger(b *testing.B, l *eventlog.Ledger, p feedProducer, ours, others int) uint64 {
	b.Helper()
	ctx := context.Background()
	strangers := []string{domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner)}
	per := others / ours
	var mid uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				seq, err := appendFeedBlock(ctx, l, p, strangers, i, per)
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					continue
				}
				if i == ours/2 {
					mu.Lock()
					mid = seq
					mu.Unlock()
				}
			}
		}()
	}
	for i := range ours {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	return mid
}

// appendFeedBlock appends per strangers' deposits and then one of ours, and
// returns the sequence of ours.
func appendFeedBlock(ctx context.Context, l *eventlog.Ledger, p feedProducer, strangers []string, i, per int) (uint64, error) {
	for k := range per {
		who := strangers[k%len(strangers)]
		dep := domain.NewID(domain.PrefixDeposit)
		ev := domain.NewEvent(who, dep, domain.NewID(domain.PrefixChurch), time.Now(), &domain.DepositReceived{
			DepositID: dep, Amount: 1_00, Currency: "USD", Trace: "other", BankTS: domain.FormatTime(time.Now()),
		})
		if _, err := l.Append(ctx, ev, "", 0); err != nil {
			return 0, err
		}
	}
	recs, err := runJob(ctx, l, produceJob{who: p, kind: []int{jobCreate, jobDeposit, jobCreateActivate}[i%3], n: i})
	if err != nil {
		return 0, err
	}
	return recs[0].Seq, nil
}
