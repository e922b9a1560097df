package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// Many clients importing for one partner at once all succeed, and an
// external id they all name is stored once: the first import to reserve it
// stores it, the others find it taken, none fails.
func TestConcurrentImportsForOnePartnerAllSucceed(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	const clients, each = 16, 10
	var wg sync.WaitGroup
	statuses := make(chan string, clients*each)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf(`{"churches":[{"name":"C %d-%d","external_id":"c-%d-%d"},{"name":"Shared","external_id":"shared"}]}`, w, i, w, i)
				r := c.Do(http.MethodPost, importPath, body, nil)
				if r.Status != 200 {
					statuses <- fmt.Sprintf("%d %s", r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		t.Errorf("import failed: %s", s)
	}
	if t.Failed() {
		t.Logf("logs:\n%s", ts.Logs)
		t.FailNow()
	}
	// Exactly one church holds the shared external id.
	shared := 0
	for _, imp := range imports(t, ts.Ledger, pid) {
		for _, ch := range imp.Created {
			if ch.ExternalID != nil && *ch.ExternalID == "shared" {
				shared++
			}
		}
	}
	if shared != 1 {
		t.Fatalf("%d churches with external_id shared, want 1", shared)
	}
}
