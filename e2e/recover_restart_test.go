package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// A recovery the service answered 202 for completes after the process is
// stopped right after the answer, by SIGTERM or by SIGKILL, and started
// again: every event of its range reaches the endpoint once, in ledger
// order.
func TestAcceptedRecoverySurvivesAStop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	for _, stop := range []string{"SIGTERM", "SIGKILL"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			srv := startServer(t, dir, nil)
			c, _ := srv.partner(t, "https://recover.example")
			var imp struct {
				Results []struct {
					Church struct {
						ID string `json:"id"`
					} `json:"church"`
				} `json:"results"`
			}
			c.Do(http.MethodPost, importPath, `{"churches":[{"name":"Recovered"}]}`, nil).JSON(t, &imp)
			church := imp.Results[0].Church.ID
			since := time.Now().UTC().Add(-time.Second)
			for i := range 3 {
				r := c.Do(http.MethodPost, "/sandbox/simulate/deposit", fmt.Sprintf(`{"church_id":%q,"account_ref":"acct_1","amount":%d.00}`, church, 10+i), nil)
				if r.Status != http.StatusOK {
					t.Fatalf("deposit: %d %s", r.Status, r.Body)
				}
			}
			var feed struct {
				Data []struct {
					EventID string `json:"event_id"`
				} `json:"data"`
			}
			c.Do(http.MethodGet, "/v1/events?type=deposit.received", nil, nil).JSON(t, &feed)
			var want []string
			for _, e := range feed.Data {
				want = append(want, e.EventID)
			}
			if len(want) != 3 {
				t.Fatalf("the feed holds %d deposits, want 3", len(want))
			}
			// The receiver hangs on the recovery's first delivery until the
			// stop cuts it, then accepts everything.
			reached := make(chan struct{})
			rc := newReceiver(t, func(n int, _ *http.Request, _ http.ResponseWriter) int {
				if n == 1 {
					close(reached)
					return 0
				}
				return http.StatusOK
			})
			// Created after the deposits, the endpoint received none of them.
			ep := createEndpoint(t, c, rc.URL, "deposit.received")
			id, total := startRecovery(t, c, ep.ID, map[string]any{"since": since.Format(time.RFC3339Nano)})
			if total != len(want) {
				t.Fatalf("total %d, want %d", total, len(want))
			}
			select {
			case <-reached:
			case <-time.After(20 * time.Second):
				t.Fatal("the recovery sent nothing")
			}
			if stop == "SIGTERM" {
				if code := srv.terminate(t); code != 0 {
					t.Fatalf("exit %d after SIGTERM", code)
				}
			} else {
				srv.kill()
			}

			srv = startServer(t, dir, nil)
			c = &apitest.Client{TB: t, Base: srv.URL, Key: c.Key}
			waitFor(t, 30*time.Second, "every event of the range received after the restart", func() bool { return len(rc.accepted()) == len(want) })
			waitFor(t, 10*time.Second, "the recovery completed", func() bool {
				time.Sleep(200 * time.Millisecond) // under the partner's rate limit
				return getRecovery(t, c, ep.ID, id).Status == "completed"
			})
			var got []string
			for _, d := range rc.deliveries() {
				if d.Status == http.StatusOK && !slices.Contains(got, d.EventID) {
					got = append(got, d.EventID)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("received %v, want %v in ledger order", got, want)
			}
			// The delivery the stop cut is sent again; nothing else is.
			if rc.count() != len(want)+1 {
				t.Fatalf("%d deliveries, want %d: the one cut and each event once", rc.count(), len(want)+1)
			}
			if r := getRecovery(t, c, ep.ID, id); r.Sent != len(want) || r.Failed != 0 {
				t.Fatalf("completed: %+v", r)
			}
			rc.verifyAll(t, ep.Secret)
		})
	}
}
