package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// endpointState reads an endpoint's status and disabled_reason.
func endpointState(t *testing.T, c *apitest.Client, id string) (string, any) {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+id, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("get endpoint %s: %d %s", id, resp.Status, resp.Body)
	}
	m := resp.Map(t)
	return m["status"].(string), m["disabled_reason"]
}

// feedOfType lists the partner's feed items of one type.
func feedOfType(t *testing.T, c *apitest.Client, typ string) []map[string]any {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/events?limit=100&type="+typ, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("feed: %d %s", resp.Status, resp.Body)
	}
	var page struct {
		Data []map[string]any `json:"data"`
	}
	resp.JSON(t, &page)
	return page.Data
}

func TestWebhookEndpointDisableAndEnable(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL)

	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", nil, apitest.Header{"Idempotency-Key": "off-1"})
	if resp.Status != http.StatusOK || resp.Map(t)["status"] != "disabled" || resp.Map(t)["disabled_reason"] != "manual" {
		t.Fatalf("disable: %d %s", resp.Status, resp.Body)
	}
	// Again: nothing changes.
	if resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", map[string]any{}, nil); resp.Status != http.StatusOK || resp.Map(t)["disabled_reason"] != "manual" {
		t.Fatalf("disable again: %d %s", resp.Status, resp.Body)
	}
	_, missed, _ := appendEnrollment(t, ts.Ledger, pid)

	resp = c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/enable", nil, nil)
	if resp.Status != http.StatusOK || resp.Map(t)["status"] != "enabled" || resp.Map(t)["disabled_reason"] != nil {
		t.Fatalf("enable: %d %s", resp.Status, resp.Body)
	}
	_, after, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the event after enabling delivered", func() bool { return rc.accepted()[after] })
	// The fan-out goes in ledger order: once the later event arrived, the
	// one appended while the endpoint was disabled was passed over, and
	// enabling did not replay it.
	if got := rc.received(); got[missed] != 0 || len(got) != 1 {
		t.Fatalf("receiver got %v: the event appended while disabled (%s) must not arrive", got, missed)
	}
	// A manual disable emits nothing.
	if items := feedOfType(t, c, "webhook_endpoint.disabled"); len(items) != 0 {
		t.Fatalf("a manual disable put %d events on the feed", len(items))
	}
	rc.verifyAll(t, ep.Secret)

	// Another partner's endpoint, or none, is 404; a body that is not an
	// object is 400.
	other, _ := ts.partner(t)
	checkProblem(t, other.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", nil, nil), http.StatusNotFound, "not-found")
	checkProblem(t, other.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/enable", nil, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/we_nope/disable", nil, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", `[1]`, nil), http.StatusBadRequest, "malformed-json")
	if status, _ := endpointState(t, c, ep.ID); status != "enabled" {
		t.Fatalf("another partner changed the endpoint: %s", status)
	}
}

func TestWebhookEndpointFailingForTheSpanIsDisabled(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withWebhooks(func(c *dispatcher.Config) {
		c.Schedule, c.Jitter, c.DisableAfter = repeatWait(40, 200*time.Millisecond), -1, 1500*time.Millisecond
	}))
	c, pid := ts.partner(t)
	var healthy atomic.Bool
	dead := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	deadEp := createEndpoint(t, c, dead.URL)
	watch := okReceiver(t)
	watchEp := createEndpoint(t, c, watch.URL)

	started := time.Now()
	_, first, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 20*time.Second, "the failing endpoint disabled", func() bool {
		_, reason := endpointState(t, c, deadEp.ID)
		return reason == "failing"
	})
	if d := time.Since(started); d < 1500*time.Millisecond {
		t.Fatalf("disabled after %v, before the 1.5s span", d)
	}
	// The partner's other endpoint and the feed get webhook_endpoint.disabled.
	var notice map[string]any
	waitFor(t, 10*time.Second, "webhook_endpoint.disabled delivered to the other endpoint", func() bool {
		for _, d := range watch.deliveries() {
			if d.EventType == "webhook_endpoint.disabled" {
				_ = json.Unmarshal(d.Body, &notice)
				return true
			}
		}
		return false
	})
	payload := notice["payload"].(map[string]any)
	if payload["webhook_endpoint_id"] != deadEp.ID || payload["reason"] != "failing" || notice["church_id"] != "" {
		t.Fatalf("notice: %v", notice)
	}
	items := feedOfType(t, c, "webhook_endpoint.disabled")
	if len(items) != 1 || items[0]["event_id"] != notice["event_id"] {
		t.Fatalf("feed: %v, want the delivered notice %v", items, notice["event_id"])
	}
	for _, d := range dead.deliveries() {
		if d.EventType == "webhook_endpoint.disabled" {
			t.Fatal("the disabled endpoint was sent its own disabling")
		}
	}
	if got := dead.received(); len(got) != 1 || got[first] < 2 {
		t.Fatalf("the dead endpoint got %v, want several attempts of %s only", got, first)
	}

	// Disabled, it receives nothing more, retries included, even once its
	// receiver is back.
	healthy.Store(true)
	_, whileOff, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the next event at the other endpoint", func() bool { return watch.accepted()[whileOff] })
	if dead.received()[whileOff] != 0 {
		t.Fatal("the disabled endpoint got a new event")
	}

	// Enabled, it gets what happens from then on, and nothing it missed.
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+deadEp.ID+"/enable", nil, nil)
	if resp.Status != http.StatusOK || resp.Map(t)["status"] != "enabled" {
		t.Fatalf("enable: %d %s", resp.Status, resp.Body)
	}
	_, afterOn, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the event after enabling", func() bool { return dead.accepted()[afterOn] })
	if dead.received()[whileOff] != 0 {
		t.Fatal("enabling replayed an event from while the endpoint was disabled")
	}
	dead.verifyAll(t, deadEp.Secret)
	watch.verifyAll(t, watchEp.Secret)
}

func TestWebhookResendOneEvent(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "enrollment.created")
	first, e1, _ := appendEnrollment(t, ts.Ledger, pid)
	_, e2, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "both events delivered", func() bool { return rc.accepted()[e1] && rc.accepted()[e2] })

	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": e1}, apitest.Header{"Idempotency-Key": "resend-1"})
	if resp.Status != http.StatusAccepted {
		t.Fatalf("resend: %d %s", resp.Status, resp.Body)
	}
	attemptID, _ := resp.Map(t)["attempt_id"].(string)
	var logged attemptView
	waitFor(t, 10*time.Second, "the resent attempt logged", func() bool {
		for _, a := range attempts(t, c, ep.ID) {
			if a.ID == attemptID {
				logged = a
				return true
			}
		}
		return false
	})
	if logged.EventID != e1 || logged.Attempt != 1 || logged.Outcome != "succeeded" || logged.StatusCode == nil || *logged.StatusCode != 200 {
		t.Fatalf("resent attempt: %+v", logged)
	}
	// The receiver got e1 twice and e2 once: the resend sent that event
	// only, signed like any delivery (both schemes, verified independently).
	if got := rc.received(); got[e1] != 2 || got[e2] != 1 || len(got) != 2 {
		t.Fatalf("receiver got %v", got)
	}
	ds := rc.deliveries()
	if last := ds[len(ds)-1]; last.EventID != e1 || last.Header.Get("Service-Webhook-Attempt") != "1" || string(last.Body) != string(first.Data) {
		t.Fatalf("resent delivery: %s %q %s", last.EventID, last.Header.Get("Service-Webhook-Attempt"), last.Body)
	}
	rc.verifyAll(t, ep.Secret)

	// Refusals: another partner's event or endpoint, an unknown event, an
	// event the endpoint does not subscribe to, a disabled endpoint, no
	// event_id.
	other, otherID := ts.partner(t)
	_, foreign, _ := appendEnrollment(t, ts.Ledger, otherID)
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": foreign}, nil), http.StatusNotFound, "not-found")
	checkProblem(t, other.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": e1}, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": "evt_nope"}, nil), http.StatusNotFound, "not-found")
	activated, err := activateEnrollment(context.Background(), ts.Ledger, pid, first.Aggregate)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := activated.Event()
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": ev.ID}, nil), http.StatusUnprocessableEntity, "not-subscribed")
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{}, nil), http.StatusUnprocessableEntity, "validation-error")
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", nil, nil)
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": e1}, nil), http.StatusConflict, "endpoint-disabled")
	if got := rc.received(); got[e1] != 2 || len(got) != 2 {
		t.Fatalf("a refused resend sent something: %v", got)
	}
}

func TestWebhookDeliveriesFilterAndPages(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(repeatWait(9, time.Hour)...))
	c, pid := ts.partner(t)
	// Odd requests fail, even ones succeed.
	rc := newReceiver(t, func(n int, _ *http.Request, _ http.ResponseWriter) int {
		if n%2 == 1 {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	ep := createEndpoint(t, c, rc.URL)
	for range 6 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		waitFor(t, 10*time.Second, "the event attempted", func() bool { return rc.received()[id] == 1 })
	}
	waitFor(t, 10*time.Second, "six attempts logged", func() bool { return len(attempts(t, c, ep.ID)) == 6 })
	all := attempts(t, c, ep.ID)

	type page struct {
		Data       []attemptView `json:"data"`
		HasMore    bool          `json:"has_more"`
		NextCursor *string       `json:"next_cursor"`
	}
	walk := func(query string) []attemptView {
		var out []attemptView
		path := "/v1/webhook_endpoints/" + ep.ID + "/deliveries?limit=2" + query
		for {
			resp := c.Do(http.MethodGet, path, nil, nil)
			if resp.Status != http.StatusOK {
				t.Fatalf("%s: %d %s", path, resp.Status, resp.Body)
			}
			var p page
			resp.JSON(t, &p)
			out = append(out, p.Data...)
			if !p.HasMore {
				if p.NextCursor != nil {
					t.Fatalf("last page with a next_cursor")
				}
				return out
			}
			path = "/v1/webhook_endpoints/" + ep.ID + "/deliveries?limit=2" + query + "&cursor=" + *p.NextCursor
		}
	}
	if got := walk(""); len(got) != 6 || got[0].ID != all[0].ID || got[5].ID != all[5].ID {
		t.Fatalf("pages: %d attempts, want the 6 newest first", len(got))
	}
	failed, succeeded := walk("&outcome=failed"), walk("&outcome=succeeded")
	if len(failed) != 3 || len(succeeded) != 3 {
		t.Fatalf("failed %d, succeeded %d, want 3 and 3", len(failed), len(succeeded))
	}
	for _, a := range failed {
		if a.Outcome != "failed" || a.StatusCode == nil || *a.StatusCode != 502 || a.Error == nil || a.NextAttemptAt == nil || a.Attempt != 1 || a.EventID == "" {
			t.Errorf("failed attempt: %+v", a)
		}
	}
	for _, a := range succeeded {
		if a.Outcome != "succeeded" || a.StatusCode == nil || *a.StatusCode != 200 || a.Error != nil || a.NextAttemptAt != nil {
			t.Errorf("succeeded attempt: %+v", a)
		}
	}
	checkProblem(t, c.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/deliveries?outcome=timeout", nil, nil), http.StatusUnprocessableEntity, "validation-error")
	checkProblem(t, c.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/deliveries?cursor=forged", nil, nil), http.StatusBadRequest, "invalid-cursor")
	other, _ := ts.partner(t)
	checkProblem(t, other.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/deliveries", nil, nil), http.StatusNotFound, "not-found")
}

// recoveryState reads a recovery's progress.
type recoveryState struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Total  int     `json:"total"`
	Sent   int     `json:"sent"`
	Failed int     `json:"failed"`
	Error  *string `json:"error"`
}

func getRecovery(t *testing.T, c *apitest.Client, endpointID, id string) recoveryState {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+endpointID+"/recoveries/"+id, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("recovery %s: %d %s", id, resp.Status, resp.Body)
	}
	var r recoveryState
	resp.JSON(t, &r)
	return r
}

func startRecovery(t *testing.T, c *apitest.Client, endpointID string, body map[string]any) (string, int) {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+endpointID+"/recover", body, nil)
	if resp.Status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", resp.Status, resp.Body)
	}
	m := resp.Map(t)
	if m["status"] != "running" && m["status"] != "completed" {
		t.Fatalf("recover answered %s", resp.Body)
	}
	return m["recovery_id"].(string), int(m["total"].(float64))
}

// A recovery re-delivers exactly the subscribed events of its range, in
// ledger order, and resumes after a restart from the event after the last
// one it sent: the event interrupted by the stop is sent again, none is
// lost and none accepted twice.
func TestWebhookRecoverInLedgerOrderAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startStack(t, withDir(dir))
	c, pid := ts.partner(t)
	since := time.Now().UTC().Add(-time.Second)
	var want []string
	for range 30 {
		rec, id, _ := appendEnrollment(t, ts.Ledger, pid)
		want = append(want, id)
		if len(want)%3 == 0 { // an event of a type the endpoint does not want
			if _, err := activateEnrollment(context.Background(), ts.Ledger, pid, rec.Aggregate); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The receiver accepts ten, hangs on the eleventh until the stop cuts
	// it, then accepts everything.
	reached := make(chan struct{})
	rc := newReceiver(t, func(n int, _ *http.Request, _ http.ResponseWriter) int {
		switch {
		case n <= 10:
			return http.StatusOK
		case n == 11:
			close(reached)
			return 0
		}
		return http.StatusOK
	})
	// Created after the events, the endpoint received none of them.
	ep := createEndpoint(t, c, rc.URL, "enrollment.created")
	id, total := startRecovery(t, c, ep.ID, map[string]any{"since": since.Format(time.RFC3339Nano)})
	if total != 30 {
		t.Fatalf("total %d, want 30", total)
	}
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the recovery did not reach the eleventh event")
	}
	if r := getRecovery(t, c, ep.ID, id); r.Status != "running" || r.Sent != 10 || r.Total != 30 {
		t.Fatalf("mid-recovery: %+v", r)
	}
	ts.stop()

	ts = startStack(t, withDir(dir))
	c = &apitest.Client{TB: t, Base: ts.URL, Key: c.Key}
	waitFor(t, 30*time.Second, "the recovery completed after the restart", func() bool {
		return getRecovery(t, c, ep.ID, id).Status == "completed"
	})
	if r := getRecovery(t, c, ep.ID, id); r.Total != 30 || r.Sent != 30 || r.Failed != 0 || r.Error != nil {
		t.Fatalf("completed: %+v", r)
	}
	var accepted, cut []string
	for _, d := range rc.deliveries() {
		switch d.Status {
		case http.StatusOK:
			accepted = append(accepted, d.EventID)
		case 0:
			cut = append(cut, d.EventID)
		}
	}
	if !slices.Equal(accepted, want) {
		t.Fatalf("accepted %d events %v,\nwant exactly %d in ledger order %v", len(accepted), accepted, len(want), want)
	}
	if len(cut) != 1 || cut[0] != want[10] {
		t.Fatalf("cut by the stop: %v, want the eleventh event %s", cut, want[10])
	}
	rc.verifyAll(t, ep.Secret)
	// Each is in the deliveries list as its own attempt, once the attempt
	// log (recorded asynchronously) has stored the last of them.
	waitFor(t, 10*time.Second, "thirty attempts logged", func() bool { return len(attempts(t, c, ep.ID)) >= 30 })
	if n := len(attempts(t, c, ep.ID)); n != 30 {
		t.Fatalf("%d attempts listed, want 30", n)
	}
}

func TestWebhookRecoverRangesAndRefusals(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	var ids []string
	var mid time.Time
	for i := range 6 {
		if i == 3 {
			// occurred_at has millisecond precision: the later events are
			// stamped after mid.
			mid = time.Now().UTC()
			waitFor(t, time.Second, "the clock to pass mid", func() bool { return time.Since(mid) > 2*time.Millisecond })
		}
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		ids = append(ids, id)
	}
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL)

	// Since a time: the events that occurred then or later.
	id, total := startRecovery(t, c, ep.ID, map[string]any{"since": mid.Format(time.RFC3339Nano)})
	waitFor(t, 10*time.Second, "the time recovery completed", func() bool { return getRecovery(t, c, ep.ID, id).Status == "completed" })
	var got []string
	for _, d := range rc.deliveries() {
		got = append(got, d.EventID)
	}
	if total != 3 || !slices.Equal(got, ids[3:]) {
		t.Fatalf("recovered %d: %v, want %v", total, got, ids[3:])
	}
	rc = okReceiver(t)
	ep = createEndpoint(t, c, rc.URL)

	// After a feed cursor: the events after the third.
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	c.Do(http.MethodGet, "/v1/events?limit=3", nil, nil).JSON(t, &page)
	id, total = startRecovery(t, c, ep.ID, map[string]any{"since_cursor": page.NextCursor})
	if total != 3 {
		t.Fatalf("total %d after the cursor, want 3", total)
	}
	waitFor(t, 10*time.Second, "the cursor recovery completed", func() bool { return getRecovery(t, c, ep.ID, id).Status == "completed" })
	got = nil
	for _, d := range rc.deliveries() {
		got = append(got, d.EventID)
	}
	if !slices.Equal(got, ids[3:]) {
		t.Fatalf("recovered %v, want %v", got, ids[3:])
	}

	// until in the past of every event: nothing to send, completed at once.
	past := time.Now().Add(-time.Hour)
	id, total = startRecovery(t, c, ep.ID, map[string]any{"since": past.Add(-time.Hour).Format(time.RFC3339), "until": past.Format(time.RFC3339)})
	if r := getRecovery(t, c, ep.ID, id); total != 0 || r.Status != "completed" || r.Sent != 0 {
		t.Fatalf("empty range: total %d, %+v", total, r)
	}

	recoverPath := "/v1/webhook_endpoints/" + ep.ID + "/recover"
	for name, body := range map[string]any{
		"neither":        map[string]any{},
		"both":           map[string]any{"since": time.Now().Format(time.RFC3339), "since_cursor": page.NextCursor},
		"too old":        map[string]any{"since": time.Now().Add(-31 * 24 * time.Hour).Format(time.RFC3339)},
		"future":         map[string]any{"since": time.Now().Add(time.Hour).Format(time.RFC3339)},
		"until first":    map[string]any{"since": time.Now().Add(-time.Hour).Format(time.RFC3339), "until": time.Now().Add(-2 * time.Hour).Format(time.RFC3339)},
		"not a time":     map[string]any{"since": "yesterday"},
		"until not time": map[string]any{"since": time.Now().Format(time.RFC3339), "until": 5},
	} {
		resp := c.Do(http.MethodPost, recoverPath, body, nil)
		if name == "until not time" {
			checkProblem(t, resp, http.StatusUnprocessableEntity, "validation-error")
			continue
		}
		t.Run(name, func(t *testing.T) { checkProblem(t, resp, http.StatusBadRequest, "invalid-range") })
	}
	checkProblem(t, c.Do(http.MethodPost, recoverPath, map[string]any{"since_cursor": "forged"}, nil), http.StatusBadRequest, "invalid-cursor")
	other, _ := ts.partner(t)
	checkProblem(t, other.Do(http.MethodPost, recoverPath, map[string]any{"since": time.Now().Format(time.RFC3339)}, nil), http.StatusNotFound, "not-found")
	checkProblem(t, other.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/recoveries/"+id, nil, nil), http.StatusNotFound, "not-found")
	checkProblem(t, c.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/recoveries/wr_nope", nil, nil), http.StatusNotFound, "not-found")
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/disable", nil, nil)
	checkProblem(t, c.Do(http.MethodPost, recoverPath, map[string]any{"since": time.Now().Format(time.RFC3339)}, nil), http.StatusConflict, "endpoint-disabled")
}

// A resend accepted while the endpoint's one slot is taken waits in the
// durable queue: stopped there, it is made after the restart, under the
// attempt id the 202 named.
func TestWebhookResendSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := []stackOption{withDir(dir), withWebhooks(func(c *dispatcher.Config) { c.Concurrency, c.Timeout = 1, time.Minute })}
	ts := startStack(t, opts...)
	c, pid := ts.partner(t)
	var hang atomic.Bool
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int {
		if hang.Load() {
			return 0
		}
		return http.StatusOK
	})
	ep := createEndpoint(t, c, rc.URL)
	_, e0, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the first event delivered", func() bool { return rc.accepted()[e0] })

	// The next event takes the endpoint's only slot and hangs there.
	hang.Store(true)
	_, e1, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the second event hanging", func() bool { return rc.received()[e1] == 1 })
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/resend", map[string]any{"event_id": e0}, nil)
	if resp.Status != http.StatusAccepted {
		t.Fatalf("resend: %d %s", resp.Status, resp.Body)
	}
	attemptID := resp.Map(t)["attempt_id"].(string)
	ts.stop()
	if got := rc.received()[e0]; got != 1 {
		t.Fatalf("the resend was sent before the stop (%d deliveries of %s)", got, e0)
	}

	hang.Store(false)
	ts = startStack(t, opts...)
	c = &apitest.Client{TB: t, Base: ts.URL, Key: c.Key}
	waitFor(t, 20*time.Second, "the resent attempt made after the restart", func() bool {
		for _, a := range attempts(t, c, ep.ID) {
			if a.ID == attemptID {
				return a.Outcome == "succeeded" && a.EventID == e0
			}
		}
		return false
	})
	waitFor(t, 20*time.Second, "the cut event delivered again", func() bool { return rc.accepted()[e1] })
	if got := rc.accepted(); len(got) != 2 || rc.received()[e0] != 2 {
		t.Fatalf("received %v, want %s twice (its delivery and the resend) and %s", rc.received(), e0, e1)
	}
	rc.verifyAll(t, ep.Secret)
}
