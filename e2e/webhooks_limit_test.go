package e2e

import (
	"net/http"
	"sync"
	"testing"

	"github.com/partnergiving/giving/domain"
)

// Creates racing for a partner's last endpoints never take it past the
// limit: exactly MaxWebhookEndpoints succeed, the others are 409s.
func TestConcurrentEndpointCreatesKeepTheLimit(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rc := newReceiver(t, nil)
	const tries = 3 * domain.MaxWebhookEndpoints
	statuses := make(chan int, tries)
	var wg sync.WaitGroup
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}}, nil).Status
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusCreated] != domain.MaxWebhookEndpoints || counts[http.StatusConflict] != tries-domain.MaxWebhookEndpoints {
		t.Fatalf("statuses %v; want %d created and the rest 409", counts, domain.MaxWebhookEndpoints)
	}
	var page struct {
		Data []endpoint `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/webhook_endpoints?limit=100", nil, nil).JSON(t, &page)
	if len(page.Data) != domain.MaxWebhookEndpoints {
		t.Fatalf("the partner has %d endpoints, limit %d", len(page.Data), domain.MaxWebhookEndpoints)
	}
	if n := countEvents(t, ts, "webhook_endpoint.created"); n != domain.MaxWebhookEndpoints {
		t.Fatalf("%d webhook_endpoint.created events in the ledger", n)
	}
}
