package eventlog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// Concurrent LastSeq calls share stream info requests; each must still
// see every append acknowledged before it asked, as the recall's catch-up
// relies on. Appenders ask right after each of their appends, so calls
// keep joining requests while others are out; and a call whose context
// ends while it waits returns at once with the context's error.
func TestLastSeqSeesEveryAppendBeforeIt(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	partner := domain.NewID(domain.PrefixPartner)
	const appenders, rounds = 16, 25
	var wg sync.WaitGroup
	errs := make(chan string, appenders*rounds)
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				ev := domain.NewEvent(partner, domain.NewID(domain.PrefixPartner), "", time.Now(), &domain.PartnerCreated{
					Name: "Last Seq", Environment: "sandbox", RedirectOrigins: []string{"https://ls.example"},
				})
				app, err := l.Append(ctx, ev, "", 0)
				if err != nil {
					errs <- err.Error()
					return
				}
				last, err := l.LastSeq(ctx)
				if err != nil || last < app.Record.Seq {
					errs <- fmt.Sprintf("an append acknowledged at %d, and then LastSeq %d, %v", app.Record.Seq, last, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	last, err := l.LastSeq(ctx)
	if err != nil || last != appenders*rounds {
		t.Fatalf("LastSeq after every append = %d, %v; want %d", last, err, appenders*rounds)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.LastSeq(done); err == nil {
		t.Fatal("LastSeq with an ended context answered without error")
	}
}
