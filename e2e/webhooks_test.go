package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
)

func TestWebhookEndpointSecretShownOnceAndNeverStoredPlain(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "enrollment.created", "enrollment.activated", "enrollment.created")

	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ep.Secret, "whsec_"))
	if !strings.HasPrefix(ep.Secret, "whsec_") || err != nil || len(raw) < 32 {
		t.Fatalf("secret %q: want whsec_ and at least 32 random bytes (%v, %d bytes)", ep.Secret, err, len(raw))
	}
	other := createEndpoint(t, c, rc.URL)
	if other.Secret == ep.Secret {
		t.Fatal("two endpoints got the same secret")
	}
	// The same Idempotency-Key answers the first creation again, secret
	// included, and creates nothing.
	key := apitest.Header{"Idempotency-Key": "create-hook-1"}
	first := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}}, key)
	again := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}}, key)
	if first.Status != http.StatusCreated || again.Status != http.StatusOK || !bytes.Equal(first.Body, again.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
	}
	replayed := first.Map(t)["id"].(string)
	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/"+replayed, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete replayed endpoint: %d", r.Status)
	}

	get := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID, nil, nil)
	if get.Status != http.StatusOK || bytes.Contains(get.Body, []byte(`"secret"`)) || bytes.Contains(get.Body, []byte("whsec_")) || bytes.Contains(get.Body, []byte(ep.Secret)) {
		t.Fatalf("GET endpoint shows a secret or failed: %d %s", get.Status, get.Body)
	}
	m := get.Map(t)
	if types := m["event_types"].([]any); len(types) != 2 || types[0] != "enrollment.created" || types[1] != "enrollment.activated" {
		t.Errorf("event_types not normalised: %v", types)
	}
	if m["status"] != "enabled" || m["url"] != rc.URL {
		t.Errorf("endpoint: %s", get.Body)
	}
	list := c.Do(http.MethodGet, "/v1/webhook_endpoints", nil, nil)
	if list.Status != http.StatusOK || bytes.Contains(list.Body, []byte("whsec_")) || bytes.Contains(list.Body, []byte(`"secret"`)) {
		t.Fatalf("list shows a secret or failed: %d %s", list.Status, list.Body)
	}
	if n := len(list.Map(t)["data"].([]any)); n != 2 {
		t.Fatalf("list has %d endpoints, want 2", n)
	}

	// The plaintext secret is nowhere in the ledger or the projections.
	recs, _, err := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().All(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if bytes.Contains(r.Data, []byte(ep.Secret)) || bytes.Contains(r.Data, raw) {
			t.Fatalf("ledger record %d (%s) holds the plaintext secret", r.Seq, r.Type)
		}
	}
	dump, err := ts.Store.Dump()
	if err != nil {
		t.Fatal(err)
	}
	for bucket, kv := range dump {
		for k, v := range kv {
			if strings.Contains(v, ep.Secret) || strings.Contains(k, ep.Secret) {
				t.Fatalf("projection bucket %s holds the plaintext secret", bucket)
			}
		}
	}
}

func TestWebhookEndpointValidationAndIsolation(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	b, _ := ts.partner(t)
	rc := okReceiver(t)
	cases := []struct {
		name, field string
		body        any
	}{
		{"no event types", "event_types", map[string]any{"url": rc.URL, "event_types": []string{}}},
		{"missing event types", "event_types", map[string]any{"url": rc.URL}},
		{"null event types", "event_types", map[string]any{"url": rc.URL, "event_types": nil}},
		{"unknown type", "event_types", map[string]any{"url": rc.URL, "event_types": []string{"enrollment.created", "donor.phone_verified"}}},
		{"internal type", "event_types", map[string]any{"url": rc.URL, "event_types": []string{"partner.key_issued"}}},
		{"test type", "event_types", map[string]any{"url": rc.URL, "event_types": []string{"webhook_endpoint.test"}}},
		{"types not strings", "event_types", map[string]any{"url": rc.URL, "event_types": []any{1}}},
		{"missing url", "url", map[string]any{"event_types": []string{"*"}}},
		{"relative url", "url", map[string]any{"url": "/hooks", "event_types": []string{"*"}}},
		{"ftp url", "url", map[string]any{"url": "ftp://example.org/x", "event_types": []string{"*"}}},
		{"credentials", "url", map[string]any{"url": "http://user:pw@127.0.0.1/x", "event_types": []string{"*"}}},
		{"fragment", "url", map[string]any{"url": rc.URL + "#frag", "event_types": []string{"*"}}},
		{"link-local on sandbox", "url", map[string]any{"url": "http://169.254.169.254/latest/meta-data", "event_types": []string{"*"}}},
		{"private on sandbox", "url", map[string]any{"url": "http://10.0.0.7/hook", "event_types": []string{"*"}}},
		{"unknown field", "secret", map[string]any{"url": rc.URL, "event_types": []string{"*"}, "secret": "whsec_mine"}},
	}
	for _, tc := range cases {
		resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", tc.body, nil)
		if resp.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", tc.name, resp.Status, resp.Body)
			continue
		}
		var p struct {
			Type   string                   `json:"type"`
			Errors []struct{ Field string } `json:"errors"`
		}
		resp.JSON(t, &p)
		if p.Type != "/problems/validation-error" || len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: want validation-error naming %s, got %s", tc.name, tc.field, resp.Body)
		}
	}
	createEndpoint(t, c, rc.URL, "*")
	ep := createEndpoint(t, c, rc.URL, "deposit.received")

	// Another partner sees none of it.
	for _, path := range []string{"/v1/webhook_endpoints/" + ep.ID, "/v1/webhook_endpoints/" + ep.ID + "/deliveries"} {
		if r := b.Do(http.MethodGet, path, nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("other partner GET %s: %d", path, r.Status)
		}
	}
	if r := b.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("other partner test: %d", r.Status)
	}
	if r := b.Do(http.MethodDelete, "/v1/webhook_endpoints/"+ep.ID, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("other partner delete: %d", r.Status)
	}
	if n := len(b.Do(http.MethodGet, "/v1/webhook_endpoints", nil, nil).Map(t)["data"].([]any)); n != 0 {
		t.Errorf("other partner lists %d endpoints", n)
	}
	if r := c.Do(http.MethodGet, "/v1/webhook_endpoints/we_nope", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("malformed id: %d", r.Status)
	}
	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/we_nope", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("delete malformed id: %d", r.Status)
	}

	// Delete, then delete again.
	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/"+ep.ID, nil, nil); r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/"+ep.ID, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("second delete: %d", r.Status)
	}
	if r := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+ep.ID, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("GET deleted: %d", r.Status)
	}

	// Pagination over the remaining endpoints and up to the limit.
	for range domain.MaxWebhookEndpoints - 1 {
		createEndpoint(t, c, rc.URL)
	}
	if r := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}}, nil); r.Status != http.StatusConflict {
		t.Fatalf("endpoint beyond the limit: %d %s", r.Status, r.Body)
	}
	var seen []string
	cursor := ""
	for range 10 {
		path := "/v1/webhook_endpoints?limit=5"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Data       []endpoint `json:"data"`
			HasMore    bool       `json:"has_more"`
			NextCursor *string    `json:"next_cursor"`
		}
		c.Do(http.MethodGet, path, nil, nil).JSON(t, &page)
		for _, e := range page.Data {
			seen = append(seen, e.ID)
		}
		if !page.HasMore {
			break
		}
		cursor = *page.NextCursor
	}
	if len(seen) != domain.MaxWebhookEndpoints || slices.Contains(seen, ep.ID) {
		t.Fatalf("paged %d endpoints (deleted one listed: %v)", len(seen), slices.Contains(seen, ep.ID))
	}
	if r := b.Do(http.MethodGet, "/v1/webhook_endpoints?cursor="+cursor, nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("foreign cursor: %d", r.Status)
	}
}

// Every delivered signature is checked by the test's own verifier, against
// the right secret and not the other endpoint's; the body is the ledger's
// bytes exactly; subscriptions and partners are respected.
func TestWebhookDeliveriesSignedPerEndpointDuringRotation(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	_, other := ts.partner(t)
	oldRc, newRc, activatedRc := okReceiver(t), okReceiver(t), okReceiver(t)
	oldEp := createEndpoint(t, c, oldRc.URL, "*")
	newEp := createEndpoint(t, c, newRc.URL, "enrollment.created")
	createEndpoint(t, c, activatedRc.URL, "enrollment.activated")

	want := map[string][]byte{}
	for range 5 {
		rec, id, _ := appendEnrollment(t, ts.Ledger, pid)
		want[id] = rec.Data
	}
	appendEnrollment(t, ts.Ledger, other) // another partner's event goes nowhere here
	waitFor(t, 15*time.Second, "both endpoints receive every event", func() bool {
		return len(oldRc.received()) == 5 && len(newRc.received()) == 5
	})
	oldRc.verifyAll(t, oldEp.Secret)
	newRc.verifyAll(t, newEp.Secret)
	for _, rc := range []*receiver{oldRc, newRc} {
		for _, d := range rc.deliveries() {
			if !bytes.Equal(d.Body, want[d.EventID]) {
				t.Errorf("delivered body of %s differs from the ledger's bytes:\n%s\n%s", d.EventID, d.Body, want[d.EventID])
			}
		}
	}
	// Each endpoint signs with its own secret only.
	d := newRc.deliveries()[0]
	if err := verifySignature(oldEp.Secret, d.Signature, d.Body, d.At); err == nil {
		t.Error("the new endpoint's delivery verifies with the old endpoint's secret")
	}

	// Old one deleted: the new one keeps receiving.
	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/"+oldEp.ID, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete old: %d", r.Status)
	}
	_, last, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "the new endpoint receives after rotation", func() bool { return newRc.received()[last] > 0 })
	if oldRc.received()[last] != 0 {
		t.Error("deleted endpoint received an event appended after its deletion")
	}
	if n := activatedRc.count(); n != 0 {
		t.Errorf("an endpoint subscribed to enrollment.activated got %d enrollment.created deliveries", n)
	}
	newRc.verifyAll(t, newEp.Secret)
}

func TestWebhookReceiverFailingThreeTimesGetsTheEvent(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(repeatWait(9, 100*time.Millisecond)...))
	c, pid := ts.partner(t)
	rc := failingReceiver(t, 3)
	ep := createEndpoint(t, c, rc.URL)
	_, id, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "four attempts logged", func() bool { return len(attempts(t, c, ep.ID)) == 4 })
	rc.verifyAll(t, ep.Secret)
	if got := rc.received(); got[id] != 4 || len(got) != 1 {
		t.Fatalf("receiver got %v, want 4 deliveries of %s", got, id)
	}
	// Each attempt says its number, and every one carries the same
	// webhook-id, so a Standard Webhooks receiver deduplicates them.
	for i, d := range rc.deliveries() {
		if got := d.Header.Get("Service-Webhook-Attempt"); got != strconv.Itoa(i+1) || d.Header.Get("webhook-id") != id {
			t.Errorf("delivery %d: Service-Webhook-Attempt %q, webhook-id %q", i, got, d.Header.Get("webhook-id"))
		}
	}
	log := attempts(t, c, ep.ID)
	for i, a := range log {
		n := 4 - i // newest first
		if a.Attempt != n || a.EventID != id || a.EventType != "enrollment.created" {
			t.Errorf("log[%d]: attempt %d of %s %s, want attempt %d of %s", i, a.Attempt, a.EventType, a.EventID, n, id)
		}
		if n < 4 && (a.Outcome != "failed" || a.StatusCode == nil || *a.StatusCode != 500 || a.NextAttemptAt == nil || a.Error == nil) {
			t.Errorf("attempt %d: %+v", n, a)
		}
	}
	if a := log[0]; a.Outcome != "succeeded" || a.StatusCode == nil || *a.StatusCode != 200 || a.NextAttemptAt != nil || a.Error != nil || a.Exhausted {
		t.Errorf("last attempt: %+v", a)
	}
}

func TestWebhookRetryAfterIsHonouredAndDeliveriesExhaust(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(100*time.Millisecond, 100*time.Millisecond))
	c, pid := ts.partner(t)
	rc := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) int {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			return http.StatusServiceUnavailable
		}
		return http.StatusBadGateway
	})
	ep := createEndpoint(t, c, rc.URL)
	_, id, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "three attempts logged", func() bool { return len(attempts(t, c, ep.ID)) == 3 })
	got := rc.deliveries()
	if gap := got[1].At.Sub(got[0].At); gap < 2*time.Second {
		t.Errorf("second attempt %s after a 503 with Retry-After: 2", gap)
	}
	log := attempts(t, c, ep.ID)
	first := log[2]
	at, _ := time.Parse(domain.TimeLayout, first.AttemptedAt)
	next, _ := time.Parse(domain.TimeLayout, *first.NextAttemptAt)
	if next.Sub(at) < 2*time.Second {
		t.Errorf("next_attempt_at %s is less than Retry-After after %s", *first.NextAttemptAt, first.AttemptedAt)
	}
	last := log[0]
	if last.Attempt != 3 || !last.Exhausted || last.NextAttemptAt != nil || last.Outcome != "failed" {
		t.Errorf("last attempt should be exhausted: %+v", last)
	}
	// The operator's log has one line per failed attempt, and one when the
	// retries run out: which endpoint and event, the attempt, the reason and
	// the next attempt; never the secret or the body.
	var failed, exhausted []map[string]any
	for _, l := range logLines(t, ts.Logs.String()) {
		if l["event_id"] != id || l["endpoint_id"] != ep.ID {
			continue
		}
		switch l["message"] {
		case "webhook attempt failed; retry scheduled":
			failed = append(failed, l)
		case "webhook delivery exhausted: no automatic retry is left; the event stays on the feed":
			exhausted = append(exhausted, l)
		}
	}
	if len(failed) != 2 || failed[0]["attempt"] != 1.0 || failed[0]["reason"] != "the receiver answered 503 Service Unavailable" ||
		failed[0]["next_attempt_at"] == nil || failed[1]["attempt"] != 2.0 || failed[0]["level"] != "warn" {
		t.Errorf("failed attempt lines: %v", failed)
	}
	if len(exhausted) != 1 || exhausted[0]["attempt"] != 3.0 || exhausted[0]["reason"] != "the receiver answered 502 Bad Gateway" ||
		exhausted[0]["level"] != "error" || exhausted[0]["next_attempt_at"] != nil {
		t.Errorf("exhausted line: %v", exhausted)
	}
	if strings.Contains(ts.Logs.String(), ep.Secret) || strings.Contains(ts.Logs.String(), `"enrollment_id"`) {
		t.Error("the log holds the endpoint's secret or an event's body")
	}
	// A later event is tried its three times too, and the exhausted one
	// never again.
	_, id2, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "second event exhausted", func() bool {
		l := attempts(t, c, ep.ID)
		return l[0].EventID == id2 && l[0].Exhausted
	})
	if n := rc.received()[id]; n != 3 {
		t.Errorf("exhausted event delivered %d times, want 3", n)
	}
	rc.verifyAll(t, ep.Secret)
}

func TestWebhookReceiverDownAcrossRestartGetsEveryEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	schedule := withRetrySchedule(repeatWait(40, 200*time.Millisecond)...)
	ts := startStack(t, withDir(dir), schedule)
	c, pid := ts.partner(t)

	// The receiver's address is reserved, then left closed: it is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ep := createEndpoint(t, c, "http://"+addr+"/hooks")

	want := map[string][]byte{}
	for range 3 {
		rec, id, _ := appendEnrollment(t, ts.Ledger, pid)
		want[id] = rec.Data
	}
	waitFor(t, 15*time.Second, "failed attempts with retries pending", func() bool {
		log := attempts(t, c, ep.ID)
		return len(log) >= 4 && log[0].Outcome == "network_error" && log[0].NextAttemptAt != nil
	})
	ts.stop()

	// While the service is down, another event is appended.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rec, id, _ := appendEnrollment(t, l, pid)
	want[id] = rec.Data
	l.Close()

	ts = startStack(t, withDir(dir), schedule)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("re-listen on %s: %v", addr, err)
	}
	rc := newReceiverOn(t, ln, func(int, *http.Request, http.ResponseWriter) int { return http.StatusOK })
	rec, id, _ = appendEnrollment(t, ts.Ledger, pid)
	want[id] = rec.Data

	waitFor(t, 20*time.Second, "every event delivered after the restart", func() bool {
		got := rc.received()
		for id := range want {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	rc.verifyAll(t, ep.Secret)
	for _, d := range rc.deliveries() {
		body, ok := want[d.EventID]
		if !ok || !bytes.Equal(body, d.Body) {
			t.Errorf("delivery of %q is not one of the events, byte for byte", d.EventID)
		}
	}
}

// A stop while first attempts wait in an endpoint's pusher (one attempt
// under way, the rest behind it) hands their events back: the next start
// delivers them at once, not after the fan-out's hold on unsettled events
// (10 s).
func TestWebhookAttemptsWaitingAtStopAreDeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	slow := withWebhooks(func(c *dispatcher.Config) { c.Timeout, c.Concurrency = 30*time.Second, 1 })
	ts := startStack(t, withDir(dir), slow)
	c, pid := ts.partner(t)
	var hanging atomic.Bool
	hanging.Store(true)
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int {
		if hanging.Load() {
			return 0
		}
		return http.StatusOK
	})
	ep := createEndpoint(t, c, rc.URL)
	want := map[string]bool{}
	for range 3 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		want[id] = true
	}
	// One attempt hangs; the two other events wait behind it in the pusher.
	waitFor(t, 15*time.Second, "the first attempt under way", func() bool { return rc.count() == 1 })
	ts.stop()
	hanging.Store(false)

	restarted := time.Now()
	ts = startStack(t, withDir(dir), slow)
	defer ts.stop()
	waitFor(t, 6*time.Second, "every event delivered after the restart, well within the hold", func() bool {
		return len(rc.accepted()) == len(want)
	})
	for id := range rc.accepted() {
		if !want[id] {
			t.Errorf("delivered %q, which is none of the events", id)
		}
	}
	t.Logf("every event delivered %s after the restart began", time.Since(restarted).Round(time.Millisecond))
	rc.verifyAll(t, ep.Secret)
}

// One endpoint hangs, one is healthy: the healthy one gets all 500 events
// promptly. Latency runs from the moment each append was acknowledged (the
// event exists in the ledger) to the moment the receiver got it; the time the
// append itself took is reported beside it, since on a shared machine the
// disk, not the dispatcher, decides that.
func TestWebhookHangingEndpointDoesNotDelayHealthyOne(t *testing.T) {
	// Serial: it bounds the healthy endpoint's p99 delivery latency at 1 s,
	// which tests running beside it on a small machine would decide.
	const concurrency = 8
	ts := startStack(t, withWebhooks(func(c *dispatcher.Config) { c.Timeout, c.Concurrency = time.Minute, concurrency }))
	c, pid := ts.partner(t)
	hang := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return 0 })
	healthy := okReceiver(t)
	hangEp := createEndpoint(t, c, hang.URL)
	ep := createEndpoint(t, c, healthy.URL)

	const events, appenders = 500, 4
	var mu sync.Mutex
	began, appended := map[string]time.Time{}, map[string]time.Time{}
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range events / appenders {
				_, id, start := appendEnrollment(t, ts.Ledger, pid)
				done := time.Now()
				mu.Lock()
				began[id], appended[id] = start, done
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	waitFor(t, 30*time.Second, "the healthy endpoint receives every event", func() bool { return len(healthy.received()) == events })
	first := map[string]time.Time{}
	for _, d := range healthy.deliveries() {
		if _, ok := first[d.EventID]; !ok {
			first[d.EventID] = d.At
		}
	}
	var lat, appendLat []time.Duration
	for id, at := range first {
		lat = append(lat, at.Sub(appended[id]))
		appendLat = append(appendLat, appended[id].Sub(began[id]))
	}
	slices.Sort(lat)
	slices.Sort(appendLat)
	pct := func(l []time.Duration, p int) time.Duration { return l[len(l)*p/100-1] }
	t.Logf("healthy endpoint: %d events; append to receipt p50 %s, p99 %s, max %s; the appends took p50 %s, p99 %s; hanging endpoint got %d requests",
		len(lat), pct(lat, 50), pct(lat, 99), lat[len(lat)-1], pct(appendLat, 50), pct(appendLat, 99), hang.count())
	if p99 := pct(lat, 99); p99 >= time.Second {
		t.Errorf("p99 latency %s, want under 1s", p99)
	}
	if n := hang.count(); n == 0 || n > concurrency {
		t.Errorf("the hanging endpoint got %d requests at once, want 1 to %d", n, concurrency)
	}
	healthy.verifyAll(t, ep.Secret)
	hang.verifyAll(t, hangEp.Secret)
}

func TestWebhookProductionRefusesInternalReceivers(t *testing.T) {
	t.Parallel()
	dns := newHosts(map[string]string{
		"loopback.example": "127.0.0.1",
		"v6loop.example":   "::1",
		"meta.example":     "169.254.169.254",
		"public.example":   "93.184.216.34",
	})
	dns.set("mixed.example", "93.184.216.34", "10.0.0.5")
	ts := startStack(t, withEnv(domain.Production), withWebhooks(func(c *dispatcher.Config) { c.Resolver = dns }))
	c, _ := ts.partner(t)
	for _, url := range []string{
		"https://127.0.0.1/hooks",
		"https://127.1.2.3:8443/hooks",
		"https://[::1]/hooks",
		"https://10.0.0.1/hooks",
		"https://172.16.5.4/hooks",
		"https://192.168.1.1/hooks",
		"https://169.254.169.254/latest/meta-data/",
		"https://100.64.0.1/hooks",
		"https://0.0.0.0/hooks",
		"https://224.0.0.1/hooks",
		"https://[fd00::1]/hooks",
		"https://[fe80::1]/hooks",
		"https://[::ffff:127.0.0.1]/hooks",
		"https://[::ffff:a9fe:a9fe]/hooks",
		"https://[64:ff9b::a00:1]/hooks",
		"https://[2002:7f00:1::]/hooks",
		"https://loopback.example/hooks",
		"https://v6loop.example/hooks",
		"https://meta.example/hooks",
		"https://mixed.example/hooks",
		"https://nowhere.example/hooks",
		"http://public.example/hooks",
	} {
		resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": url, "event_types": []string{"*"}}, nil)
		if resp.Status != http.StatusUnprocessableEntity || !bytes.Contains(resp.Body, []byte(`"field":"url"`)) {
			t.Errorf("%s: %d %s", url, resp.Status, resp.Body)
		}
	}
	if resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": "https://public.example/hooks", "event_types": []string{"*"}}, nil); resp.Status != http.StatusCreated {
		t.Fatalf("public https receiver: %d %s", resp.Status, resp.Body)
	}
}

// A name that passed the check at creation and is re-pointed at loopback
// afterwards is refused at connection time: nothing connects.
func TestWebhookConnectionIsCheckedAgainstRebinding(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := 0
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	dns := newHosts(map[string]string{"rebind.example": "93.184.216.34"})
	ts := startStack(t, withEnv(domain.Production), withWebhooks(func(c *dispatcher.Config) { c.Resolver = dns; c.Timeout = 2 * time.Second }))
	c, _ := ts.partner(t)
	ep := createEndpoint(t, c, "https://rebind.example:"+strconv.Itoa(port)+"/hooks")
	dns.set("rebind.example", "127.0.0.1")

	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, nil)
	var out struct {
		Delivered  bool    `json:"delivered"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}
	resp.JSON(t, &out)
	if resp.Status != http.StatusOK || out.Delivered || out.StatusCode != nil || out.Error == nil || !strings.Contains(*out.Error, "may not connect") {
		t.Fatalf("test delivery to a rebound name: %d %s", resp.Status, resp.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 0 {
		t.Fatalf("%d connections reached the loopback listener", conns)
	}
}

func TestWebhookAttemptLogKeepsExactlyTheLast50(t *testing.T) {
	// Serial: with one attempt at a time the log follows the appends' order
	// only while the dispatcher keeps up with them; on a machine busy with
	// other tests a first attempt spills to the delivery queue and lands
	// out of order.
	ts := startStack(t, withWebhooks(func(c *dispatcher.Config) { c.Concurrency = 1 }))
	c, pid := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL)
	var ids []string
	for range 60 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		ids = append(ids, id)
	}
	waitFor(t, 20*time.Second, "the 60th event's attempt is logged", func() bool {
		l := attempts(t, c, ep.ID)
		return len(l) > 0 && l[0].EventID == ids[59]
	})
	log := attempts(t, c, ep.ID)
	if len(log) != 50 {
		t.Fatalf("attempt log holds %d, want 50", len(log))
	}
	var prev time.Time
	for i, a := range log {
		if want := ids[59-i]; a.EventID != want {
			t.Fatalf("log[%d] is %s, want %s (newest first)", i, a.EventID, want)
		}
		if a.Attempt != 1 || a.Outcome != "succeeded" || a.StatusCode == nil || *a.StatusCode != 200 || a.NextAttemptAt != nil || a.DurationMS < 0 {
			t.Errorf("log[%d]: %+v", i, a)
		}
		at, err := time.Parse(domain.TimeLayout, a.AttemptedAt)
		if err != nil || (i > 0 && at.After(prev)) {
			t.Errorf("log[%d] attempted_at %s is not newest first", i, a.AttemptedAt)
		}
		prev = at
	}
	rc.verifyAll(t, ep.Secret)
}

func TestWebhookDeleteStopsDeliveriesAndPendingRetries(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(repeatWait(60, 100*time.Millisecond)...))
	c, pid := ts.partner(t)
	failing := func(int, *http.Request, http.ResponseWriter) int { return http.StatusInternalServerError }
	doomedRc, controlRc := newReceiver(t, failing), newReceiver(t, failing)
	doomed := createEndpoint(t, c, doomedRc.URL)
	control := createEndpoint(t, c, controlRc.URL)
	appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "retries under way", func() bool { return doomedRc.count() >= 2 })

	if r := c.Do(http.MethodDelete, "/v1/webhook_endpoints/"+doomed.ID, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.Status)
	}
	atDelete, controlAtDelete := doomedRc.count(), controlRc.count()
	_, later, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 15*time.Second, "the control endpoint goes on being retried", func() bool {
		return controlRc.count() >= controlAtDelete+6 && controlRc.received()[later] > 0
	})
	// An attempt already under way when the delete landed may still finish;
	// none starts afterwards.
	if n := doomedRc.count(); n > atDelete+1 {
		t.Fatalf("deleted endpoint got %d more deliveries", n-atDelete)
	}
	if doomedRc.received()[later] != 0 {
		t.Fatal("deleted endpoint received an event appended after the delete")
	}
	if r := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+doomed.ID+"/deliveries", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("deliveries of a deleted endpoint: %d", r.Status)
	}
	// Its queue, consumer and scheduled retries are gone from JetStream,
	// removed in the background: on a loaded machine that took over 10 s.
	ctx := context.Background()
	waitFor(t, 30*time.Second, "the deleted endpoint's consumer and retries are removed", func() bool {
		h, err := ts.Dispatcher.Holds(ctx, pid, doomed.ID)
		return err == nil && !h.Consumer && h.Messages == 0
	})
	if h, err := ts.Dispatcher.Holds(ctx, pid, control.ID); err != nil || !h.Consumer {
		t.Fatalf("the control endpoint's consumer: %+v %v", h, err)
	}
	doomedRc.verifyAll(t, doomed.Secret)
	controlRc.verifyAll(t, control.Secret)
}

func TestWebhookTestDelivery(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "deposit.received")

	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("test: %d %s", resp.Status, resp.Body)
	}
	if got := string(resp.Body); got != `{"delivered":true,"status_code":200,"error":null}` {
		t.Fatalf("test result: %s", got)
	}
	if rc.count() != 1 {
		t.Fatalf("receiver got %d requests", rc.count())
	}
	rc.verifyAll(t, ep.Secret)
	d := rc.deliveries()[0]
	var env struct {
		EventID    string            `json:"event_id"`
		EventType  string            `json:"event_type"`
		OccurredAt string            `json:"occurred_at"`
		ChurchID   *string           `json:"church_id"`
		Payload    map[string]string `json:"payload"`
	}
	if err := json.Unmarshal(d.Body, &env); err != nil {
		t.Fatal(err)
	}
	if !domain.ValidID(domain.PrefixEvent, env.EventID) || env.EventType != "webhook_endpoint.test" || env.ChurchID == nil || *env.ChurchID != "" ||
		env.Payload["webhook_endpoint_id"] != ep.ID {
		t.Fatalf("test envelope: %s", d.Body)
	}
	var doc any
	if err := json.Unmarshal(d.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if err := apitest.Document(t).Components.Schemas["WebhookEndpointTestEvent"].Value.VisitJSON(doc); err != nil {
		t.Errorf("test envelope does not match WebhookEndpointTestEvent: %v", err)
	}
	log := attempts(t, c, ep.ID)
	if len(log) != 1 || log[0].EventID != env.EventID || log[0].EventType != "webhook_endpoint.test" || log[0].Outcome != "succeeded" || log[0].NextAttemptAt != nil {
		t.Fatalf("attempt log after a test: %+v", log)
	}
	// The test event is not in the ledger, so not on the feed.
	recs, _, err := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().All(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Type == "webhook_endpoint.test" || bytes.Contains(r.Data, []byte(env.EventID)) {
			t.Fatalf("the test event reached the ledger at %d", r.Seq)
		}
	}

	// A receiver that answers 500, and one that is not there.
	bad := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusInternalServerError })
	badEp := createEndpoint(t, c, bad.URL)
	resp = c.Do(http.MethodPost, "/v1/webhook_endpoints/"+badEp.ID+"/test", "{}", nil)
	bad.verifyAll(t, badEp.Secret)
	var out struct {
		Delivered  bool    `json:"delivered"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}
	resp.JSON(t, &out)
	if resp.Status != http.StatusOK || out.Delivered || out.StatusCode == nil || *out.StatusCode != 500 || out.Error == nil {
		t.Fatalf("test to a failing receiver: %d %s", resp.Status, resp.Body)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := "http://" + ln.Addr().String() + "/hooks"
	ln.Close()
	goneEp := createEndpoint(t, c, gone)
	resp = c.Do(http.MethodPost, "/v1/webhook_endpoints/"+goneEp.ID+"/test", nil, nil)
	out = struct {
		Delivered  bool    `json:"delivered"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}{}
	resp.JSON(t, &out)
	if out.Delivered || out.StatusCode != nil || out.Error == nil {
		t.Fatalf("test to a closed port: %s", resp.Body)
	}
	if l := attempts(t, c, goneEp.ID); len(l) != 1 || l[0].Outcome != "network_error" || l[0].StatusCode != nil {
		t.Fatalf("closed port attempt: %+v", l)
	}
	if r := c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", `{"extra":1}`, nil); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("test with a body: %d", r.Status)
	}
}

// Two instances share the ledger: both take deliveries, and when one stops,
// the retries it scheduled are made by the other, since their state lives in
// JetStream and not in either process.
func TestWebhookDeliveriesMoveBetweenInstances(t *testing.T) {
	t.Parallel()
	schedule := withRetrySchedule(repeatWait(60, 150*time.Millisecond)...)
	a := startStack(t, schedule, func(c *stack.Config) { c.Ledger.NATSListen = "127.0.0.1:0" })
	key, err := os.ReadFile(filepath.Join(a.Dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := startStack(t, schedule, func(c *stack.Config) {
		c.Ledger.NATSURL, c.MasterKey = a.Ledger.ClientURL(), strings.TrimSpace(string(key))
	})
	c, pid := a.partner(t)
	var up atomic.Bool
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	ep := createEndpoint(t, c, rc.URL)
	var ids []string
	for range 40 {
		_, id, _ := appendEnrollment(t, a.Ledger, pid)
		ids = append(ids, id)
	}
	// Every attempt logs one line: "webhook attempt succeeded", "webhook
	// attempt failed; retry scheduled", or after the last "webhook delivery
	// exhausted ...".
	attemptsBy := func(ts *testStack) int {
		return strings.Count(ts.Logs.String(), `"message":"webhook attempt`) + strings.Count(ts.Logs.String(), `"message":"webhook delivery exhausted`)
	}
	waitFor(t, 20*time.Second, "both instances make attempts and every event is tried", func() bool {
		return attemptsBy(a) > 0 && attemptsBy(b) > 0 && len(rc.received()) == len(ids)
	})
	b.stop()
	up.Store(true)
	waitFor(t, 20*time.Second, "every event delivered by the remaining instance", func() bool {
		return len(rc.accepted()) == len(ids)
	})
	got := rc.received()
	for _, id := range ids {
		if got[id] < 2 {
			t.Errorf("event %s arrived %d times; want a failed attempt and a successful retry", id, got[id])
		}
	}
	rc.verifyAll(t, ep.Secret)
	t.Logf("attempts by instance a: %d, b: %d", attemptsBy(a), attemptsBy(b))
}

// A receiver that answers too late, or redirects, has not received the event:
// both are failed attempts, and a redirect is never followed.
func TestWebhookTimeoutAndRedirectAreFailures(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withWebhooks(func(c *dispatcher.Config) { c.Timeout = 300 * time.Millisecond }))
	c, _ := ts.partner(t)
	slow := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return 0 })
	target := okReceiver(t)
	redirect := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) int {
		w.Header().Set("Location", target.URL)
		return http.StatusTemporaryRedirect
	})
	type result struct {
		Delivered  bool    `json:"delivered"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}
	slowEp := createEndpoint(t, c, slow.URL)
	var out result
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+slowEp.ID+"/test", nil, nil).JSON(t, &out)
	if out.Delivered || out.StatusCode != nil || out.Error == nil || !strings.Contains(*out.Error, "no answer within 300ms") {
		t.Errorf("test to a receiver that hangs: %+v", out)
	}
	if l := attempts(t, c, slowEp.ID); len(l) != 1 || l[0].Outcome != "timeout" || l[0].DurationMS < 300 {
		t.Errorf("timeout attempt: %+v", l)
	}
	redirectEp := createEndpoint(t, c, redirect.URL)
	out = result{}
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+redirectEp.ID+"/test", nil, nil).JSON(t, &out)
	if out.Delivered || out.StatusCode == nil || *out.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("test to a receiver that redirects: %+v", out)
	}
	if l := attempts(t, c, redirectEp.ID); len(l) != 1 || l[0].Outcome != "failed" {
		t.Errorf("redirect attempt: %+v", l)
	}
	if n := target.count(); n != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", n)
	}
	slow.verifyAll(t, slowEp.Secret)
	redirect.verifyAll(t, redirectEp.Secret)
}

// A partner that, on receiving a webhook, reads the event back from the
// instance that sent it finds it: the dispatcher sends an event only once
// that instance's projections hold it. The receiver reads each event
// (GET /v1/events/{id}) while the delivery is still open, for a stream of
// deposits made as fast as the partner can. (On this machine the fan-out's
// consumer trails the projector anyway, so the test passes without the wait
// too; it holds the property against a dispatcher that gets ahead of the
// projections.)
func TestAWebhookIsReadableWhereItCameFromWhenItArrives(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Readable Chapel")
	var (
		mu     sync.Mutex
		unread []string
	)
	rc := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		id := r.Header.Get("webhook-id")
		if got := c.Do(http.MethodGet, "/v1/events/"+id, nil, nil); got.Status != http.StatusOK {
			mu.Lock()
			unread = append(unread, id+": "+strconv.Itoa(got.Status))
			mu.Unlock()
		}
		return http.StatusOK
	})
	createEndpoint(t, c, rc.URL, "deposit.received")
	// Sixteen clients at once: as fast as the partner can, without
	// queueing so many simulations at once that, on a busy machine, one
	// waits out the simulator's own timeout.
	const deposits, clients = 200, 16
	var wg sync.WaitGroup
	next := make(chan int)
	for range clients {
		wg.Go(func() {
			for i := range next {
				body := `{"church_id":"` + church + `","account_ref":"acct_` + strconv.Itoa(i) + `","amount":5.00}`
				if r := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, nil); r.Status != http.StatusOK {
					t.Errorf("deposit %d: %d %s", i, r.Status, r.Body)
				}
			}
		})
	}
	for i := range deposits {
		next <- i
	}
	close(next)
	wg.Wait()
	waitFor(t, 30*time.Second, "every deposit's webhook", func() bool { return len(rc.accepted()) == deposits })
	mu.Lock()
	defer mu.Unlock()
	if len(unread) > 0 {
		t.Fatalf("%d of %d events were not readable when their webhook arrived: %v", len(unread), deposits, unread)
	}
}
