package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// When a crash loses a key's stored answer (the records persist
// asynchronously), the retry rebuilds the answer from the event that key
// appended: byte for byte the original answer, never the state a later
// request left, for every enrollment move and endpoint change.
func TestALostAnswerIsRebuiltFromItsOwnEvent(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withNATSListen("127.0.0.1:0"))
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Replayed")
	ctx := context.Background()
	enrollment := func(paused bool) string {
		rec, err := createEnrollment(ctx, ts.Ledger, pid, church)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := activateEnrollment(ctx, ts.Ledger, pid, rec.Aggregate); err != nil {
			t.Fatal(err)
		}
		if paused {
			if _, err := execute(ctx, ts.Ledger, pid, rec.Aggregate, func(h eventlog.History) (*domain.Event, error) {
				e := domain.Fold[domain.Enrollment](h.Events)
				return domain.PauseEnrollment(&e, time.Now())
			}); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Aggregate
	}
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "enrollment.created")
	cases := []struct {
		name         string
		path         string
		first, later string // the bodies of the key's request and of a later one
		laterPath    string
	}{
		{name: "update", path: "/update", first: `{"value":2.00}`, laterPath: "/update", later: `{"value":1.50}`},
		{name: "pause", path: "/pause", laterPath: "/resume"},
		{name: "resume", path: "/resume", laterPath: "/pause"},
		{name: "cancel", path: "/cancel", first: `{"reason":"The donor asked us to stop."}`},
		{name: "disable endpoint", path: "/disable", laterPath: "/enable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := "/v1/enrollments/" + enrollment(tc.name == "resume")
			if tc.name == "disable endpoint" {
				base = "/v1/webhook_endpoints/" + ep.ID
			}
			key := apitest.Header{"Idempotency-Key": "rebuilt-" + strings.ReplaceAll(tc.name, " ", "-")}
			body := any(nil)
			if tc.first != "" {
				body = tc.first
			}
			first := c.Do(http.MethodPost, base+tc.path, body, key)
			if first.Status != http.StatusOK {
				t.Fatalf("first: %d %s", first.Status, first.Body)
			}
			eventlogtest.LoseKeyRecord(t, ts.Ledger.ClientURL(), domain.Sandbox, pid, key["Idempotency-Key"])
			if tc.laterPath != "" {
				later := any(nil)
				if tc.later != "" {
					later = tc.later
				}
				if r := c.Do(http.MethodPost, base+tc.laterPath, later, nil); r.Status != http.StatusOK || bytes.Equal(r.Body, first.Body) {
					t.Fatalf("a later request: %d %s", r.Status, r.Body)
				}
			}
			again := c.Do(http.MethodPost, base+tc.path, body, key)
			if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
				t.Fatalf("retry after the lost record: %d replayed=%q\n%s\nwant the original\n%s\n%s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body, first.Body, ts.Logs)
			}
		})
	}
}
