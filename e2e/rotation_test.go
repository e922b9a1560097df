package e2e

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// ---- A receiver's checks during a secret rotation, written from the specs ----

// verifySpecLines is a receiver following the spec during a rotation's
// overlap: every Service-Signature line must pass rule 1, and the delivery
// is accepted when one line verifies with the secret it holds (rules 2 to
// 4, verifySignature).
func verifySpecLines(secret string, d delivery) error {
	lines := d.Header.Values("Service-Signature")
	if len(lines) == 0 {
		return errors.New("no Service-Signature")
	}
	for _, l := range lines {
		if !signaturePattern.MatchString(l) {
			return fmt.Errorf("line %q does not match t=<digits>,v1=<64 lowercase hex>", l)
		}
	}
	var last error
	for _, l := range lines {
		if last = verifySignature(secret, l, d.Body, d.At); last == nil {
			return nil
		}
	}
	return last
}

// verifyEd25519 checks webhook-signature as Standard Webhooks describes its
// asymmetric scheme, with crypto/ed25519 alone: some "v1a,<base64>" entry
// is the signature of "<webhook-id>.<webhook-timestamp>.<body>" under the
// whpk_ key (base64 of the 32-byte public key).
func verifyEd25519(publicKey string, d delivery) error {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(publicKey, "whpk_"))
	if err != nil || !strings.HasPrefix(publicKey, "whpk_") || len(raw) != ed25519.PublicKeySize {
		return fmt.Errorf("public key %q is not whpk_ and 32 bytes of base64", publicKey)
	}
	ts, err := strconv.ParseInt(d.Header.Get("webhook-timestamp"), 10, 64)
	if err != nil || d.At.Unix()-ts > 300 || ts-d.At.Unix() > 300 {
		return fmt.Errorf("webhook-timestamp %q", d.Header.Get("webhook-timestamp"))
	}
	msg := []byte(d.Header.Get("webhook-id") + "." + d.Header.Get("webhook-timestamp") + "." + string(d.Body))
	for _, entry := range strings.Split(d.Header.Get("webhook-signature"), " ") {
		version, sig, _ := strings.Cut(entry, ",")
		b, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1a" && err == nil && ed25519.Verify(raw, msg, b) {
			return nil
		}
	}
	return fmt.Errorf("no v1a signature in %q verifies", d.Header.Get("webhook-signature"))
}

// endpointView is an endpoint as the API answers it.
type endpointView struct {
	ID                      string            `json:"id"`
	URL                     string            `json:"url"`
	EventTypes              []string          `json:"event_types"`
	Description             string            `json:"description"`
	Metadata                map[string]string `json:"metadata"`
	SignatureScheme         string            `json:"signature_scheme"`
	PublicKey               *string           `json:"public_key"`
	PreviousPublicKey       *string           `json:"previous_public_key"`
	PreviousSecretExpiresAt *string           `json:"previous_secret_expires_at"`
	Secret                  string            `json:"secret"`
}

// endpointCall makes a request about an endpoint that must answer 200
// with it.
func endpointCall(t *testing.T, c *apitest.Client, method, path string, body any) endpointView {
	t.Helper()
	resp := c.Do(method, path, body, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
	}
	var v endpointView
	resp.JSON(t, &v)
	return v
}

func getEndpoint(t *testing.T, c *apitest.Client, id string) endpointView {
	t.Helper()
	return endpointCall(t, c, http.MethodGet, "/v1/webhook_endpoints/"+id, nil)
}

func patchEndpoint(t *testing.T, c *apitest.Client, id string, body any) endpointView {
	t.Helper()
	return endpointCall(t, c, http.MethodPatch, "/v1/webhook_endpoints/"+id, body)
}

func rotateSecret(t *testing.T, c *apitest.Client, id string, expireIn int) endpointView {
	t.Helper()
	v := endpointCall(t, c, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", map[string]any{"expire_current_in": expireIn})
	if !strings.HasPrefix(v.Secret, domain.WebhookSecretPrefix) || v.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotation answer %+v", v)
	}
	return v
}

func expiry(t *testing.T, v endpointView) time.Time {
	t.Helper()
	at, err := time.Parse(domain.TimeLayout, *v.PreviousSecretExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// An edit takes effect for every attempt not yet made: a retry of an event
// sent to the old address goes to the new one, an event type dropped from
// the subscription is not attempted again, and the edit is an internal
// event without any secret.
func TestWebhookEndpointEditMovesPendingDeliveries(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(repeatWait(9, 300*time.Millisecond)...))
	c, pid := ts.partner(t)
	other, _ := ts.partner(t)
	down := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	up := okReceiver(t)
	ep := createEndpoint(t, c, down.URL, "enrollment.created")

	_, first, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the old address is tried", func() bool { return down.received()[first] > 0 })
	v := patchEndpoint(t, c, ep.ID, map[string]any{
		"url": up.URL, "description": "primary receiver", "metadata": map[string]string{"team": "payments", "region": "eu"},
	})
	if v.URL != up.URL || v.Description != "primary receiver" || v.Metadata["team"] != "payments" || v.Secret != "" {
		t.Fatalf("after the edit: %+v", v)
	}
	waitFor(t, 10*time.Second, "the retry reaches the new address", func() bool { return up.received()[first] > 0 })
	up.verifyAll(t, ep.Secret)

	// Metadata merges; "" removes a key. An event of a type dropped from
	// the subscription is not attempted again: its due retry sends nothing,
	// while an event of the new type goes to the new address.
	patchEndpoint(t, c, ep.ID, map[string]any{"url": down.URL, "metadata": map[string]string{"region": ""}})
	rec, second, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the new event reaches the address moved back", func() bool { return down.received()[second] > 0 })
	v = patchEndpoint(t, c, ep.ID, map[string]any{"event_types": []string{"enrollment.activated"}, "url": up.URL})
	if len(v.Metadata) != 1 || v.Metadata["team"] != "payments" || len(v.EventTypes) != 1 || v.EventTypes[0] != "enrollment.activated" {
		t.Fatalf("after the second edit: %+v", v)
	}
	// The attempt is logged once it is answered, a moment after the
	// receiver saw it.
	var due time.Time
	waitFor(t, 10*time.Second, "a retry of the event to be scheduled", func() bool {
		for _, a := range attempts(t, c, ep.ID) {
			if a.EventID == second && a.NextAttemptAt != nil && mustTime(t, *a.NextAttemptAt).After(due) {
				due = mustTime(t, *a.NextAttemptAt)
			}
		}
		return !due.IsZero()
	})
	if _, err := activateEnrollment(t.Context(), ts.Ledger, pid, rec.Aggregate); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the dropped event's retry is past due and the new type delivered", func() bool {
		return time.Now().After(due.Add(2*time.Second)) && up.count() >= 2
	})
	if up.received()[second] > 0 {
		t.Fatal("an event of a type no longer subscribed to was attempted again")
	}

	// Isolation, and the edit as the ledger holds it.
	checkProblem(t, other.Do(http.MethodPatch, "/v1/webhook_endpoints/"+ep.ID, map[string]any{"description": "x"}, nil), 404, "not-found")
	for _, ev := range ledgerEvents(t, ts.Ledger, "webhook_endpoint.updated") {
		data, _ := json.Marshal(ev.Payload)
		if strings.Contains(string(data), "secret") || strings.Contains(string(data), ep.Secret) {
			t.Fatalf("webhook_endpoint.updated carries a secret: %s", data)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(domain.TimeLayout, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// During a rotation's overlap a receiver holding the previous secret and
// one holding the new secret both verify every delivery, by the spec's
// rules and with the official Standard Webhooks Go and JavaScript
// libraries; after the expiry only the new secret verifies. The partner's
// other endpoints and the feed hear of the rotation; the rotated endpoint
// does not.
func TestWebhookSecretRotationSignsWithBothUntilExpiry(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	rc, watcher := okReceiver(t), okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "*")
	watch := createEndpoint(t, c, watcher.URL, "webhook_endpoint.secret_rotated")

	rotated := rotateSecret(t, c, ep.ID, 4)
	until := expiry(t, rotated)
	if rotated.Secret == ep.Secret || until.Before(time.Now().Add(2*time.Second)) {
		t.Fatalf("rotation answer: secret %q, previous expires %s", rotated.Secret, until)
	}
	if got := getEndpoint(t, c, ep.ID); got.PreviousSecretExpiresAt == nil || *got.PreviousSecretExpiresAt != *rotated.PreviousSecretExpiresAt || got.Secret != "" {
		t.Fatalf("the endpoint during the overlap: %+v", got)
	}
	during := map[string]bool{}
	for range 3 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		during[id] = true
	}
	waitFor(t, 10*time.Second, "the overlap's events arrive", func() bool {
		n := 0
		for id := range rc.received() {
			if during[id] {
				n++
			}
		}
		return n == 3
	})
	waitFor(t, 10*time.Second, "the expiry passes", func() bool { return time.Now().After(until.Add(time.Second)) })
	var after []string
	for range 2 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		after = append(after, id)
	}
	waitFor(t, 10*time.Second, "the events after the expiry arrive", func() bool {
		got := rc.received()
		return got[after[0]] > 0 && got[after[1]] > 0
	})

	var overlap, later []delivery
	for _, d := range rc.deliveries() {
		if d.At.Before(until.Add(-time.Second)) {
			overlap = append(overlap, d)
		} else if d.At.After(until.Add(time.Second)) {
			later = append(later, d)
		}
	}
	if len(overlap) < 3 || len(later) < 2 {
		t.Fatalf("%d deliveries in the overlap, %d after it; want at least 3 and 2", len(overlap), len(later))
	}
	for _, d := range overlap {
		if n := len(d.Header.Values("Service-Signature")); n != 2 {
			t.Errorf("delivery %s in the overlap: %d Service-Signature lines, want 2", d.EventID, n)
		}
		for name, secret := range map[string]string{"previous": ep.Secret, "new": rotated.Secret} {
			if err := verifySpecLines(secret, d); err != nil {
				t.Errorf("delivery %s in the overlap, %s secret: %v", d.EventID, name, err)
			}
			if err := verifyStandard(secret, d.Header, d.Body); err != nil {
				t.Errorf("delivery %s in the overlap, %s secret, Standard Webhooks Go library: %v", d.EventID, name, err)
			}
		}
		if std := strings.Split(d.Header.Get("webhook-signature"), " "); len(std) != 2 || std[0] != signStandard(rotated.Secret, d.EventID, time.Unix(mustInt(t, d.Header.Get("webhook-timestamp")), 0), d.Body) {
			t.Errorf("webhook-signature %q: want v1,<new> v1,<old>", std)
		}
	}
	verifyStandardJS(t, ep.Secret, overlap)
	verifyStandardJS(t, rotated.Secret, overlap)
	for _, d := range later {
		if err := verifySpecLines(rotated.Secret, d); err != nil {
			t.Errorf("delivery %s after the expiry, new secret: %v", d.EventID, err)
		}
		if err := verifySpecLines(ep.Secret, d); err == nil {
			t.Errorf("delivery %s after the expiry verifies with the previous secret", d.EventID)
		}
		if err := verifyStandard(ep.Secret, d.Header, d.Body); err == nil {
			t.Errorf("delivery %s after the expiry verifies with the previous secret (Standard Webhooks)", d.EventID)
		}
	}
	verifyStandardJS(t, rotated.Secret, later)

	// The others hear of it; the rotated endpoint does not.
	waitFor(t, 10*time.Second, "the other endpoint hears of the rotation", func() bool { return watcher.count() > 0 })
	watcher.verifyAll(t, watch.Secret)
	var env struct {
		Type    string            `json:"event_type"`
		Payload map[string]string `json:"payload"`
	}
	if err := json.Unmarshal(watcher.deliveries()[0].Body, &env); err != nil || env.Type != "webhook_endpoint.secret_rotated" ||
		env.Payload["webhook_endpoint_id"] != ep.ID || env.Payload["previous_expires_at"] != *rotated.PreviousSecretExpiresAt {
		t.Fatalf("secret_rotated delivery %s", watcher.deliveries()[0].Body)
	}
	for _, d := range rc.deliveries() {
		if d.EventType == "webhook_endpoint.secret_rotated" {
			t.Fatal("the rotated endpoint received its own rotation event")
		}
	}
	feed := c.Do(http.MethodGet, "/v1/events?type=webhook_endpoint.secret_rotated", nil, nil)
	if feed.Status != 200 || !strings.Contains(string(feed.Body), ep.ID) || strings.Contains(string(feed.Body), "secret\"") {
		t.Fatalf("feed: %d %s", feed.Status, feed.Body)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A rotation while a delivery is being retried: every retry after it
// verifies with either secret; a rotation that expires the previous secret
// at once leaves only the newest verifying.
func TestWebhookRotationWhileRetrying(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRetrySchedule(repeatWait(9, 400*time.Millisecond)...))
	c, pid := ts.partner(t)
	rc := failingReceiver(t, 4)
	ep := createEndpoint(t, c, rc.URL)
	_, id, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the first attempt fails", func() bool { return rc.count() >= 1 })
	rotated := rotateSecret(t, c, ep.ID, 3600)
	n := rc.count()
	waitFor(t, 10*time.Second, "two retries after the rotation", func() bool { return rc.count() >= n+2 })
	third := rotateSecret(t, c, ep.ID, 0)
	m := rc.count()
	waitFor(t, 15*time.Second, "the event is delivered", func() bool { return rc.accepted()[id] })

	ds := rc.deliveries()
	for i, d := range ds {
		if d.EventID != id {
			continue
		}
		switch {
		case i < n-1:
			if err := verifySpecLines(ep.Secret, d); err != nil {
				t.Errorf("attempt %d before the rotation: %v", i+1, err)
			}
		case i >= n && i < m-1:
			for _, secret := range []string{ep.Secret, rotated.Secret} {
				if err := verifySpecLines(secret, d); err != nil {
					t.Errorf("retry %d in the overlap: %v", i+1, err)
				}
				if err := verifyStandard(secret, d.Header, d.Body); err != nil {
					t.Errorf("retry %d in the overlap (Standard Webhooks): %v", i+1, err)
				}
			}
		case i >= m:
			if err := verifySpecLines(third.Secret, d); err != nil {
				t.Errorf("retry %d after the second rotation: %v", i+1, err)
			}
			if verifySpecLines(ep.Secret, d) == nil || verifySpecLines(rotated.Secret, d) == nil {
				t.Errorf("retry %d verifies with a secret expired at once", i+1)
			}
		}
	}
}

// An ed25519 endpoint's webhook-signature is Standard Webhooks' v1a,
// verified with crypto/ed25519 and the whpk_ public key the API shows at any
// time; Service-Signature stays HMAC with the whsec_ secret. Its rotation
// overlaps like an HMAC endpoint's, and an HMAC endpoint switched to
// ed25519 signs v1a from then on.
func TestWebhookEd25519Signatures(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	rc, plain := okReceiver(t), okReceiver(t)
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}, "signature_scheme": "ed25519"}, nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	var ep endpointView
	resp.JSON(t, &ep)
	if ep.SignatureScheme != "ed25519" || ep.PublicKey == nil || getEndpoint(t, c, ep.ID).PublicKey == nil || *getEndpoint(t, c, ep.ID).PublicKey != *ep.PublicKey {
		t.Fatalf("ed25519 endpoint: %s", resp.Body)
	}
	_, first, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the first event arrives", func() bool { return rc.received()[first] > 0 })
	rotated := rotateSecret(t, c, ep.ID, 3600)
	if rotated.PublicKey == nil || *rotated.PublicKey == *ep.PublicKey || rotated.PreviousPublicKey == nil || *rotated.PreviousPublicKey != *ep.PublicKey {
		t.Fatalf("rotated ed25519 endpoint: %+v", rotated)
	}
	_, second, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the second event arrives", func() bool { return rc.received()[second] > 0 })
	for _, d := range rc.deliveries() {
		if !strings.HasPrefix(d.Header.Get("webhook-signature"), "v1a,") {
			t.Errorf("webhook-signature %q, want v1a", d.Header.Get("webhook-signature"))
		}
		keys, secrets := []string{*ep.PublicKey}, []string{ep.Secret}
		if d.EventID == second {
			keys, secrets = append(keys, *rotated.PublicKey), append(secrets, rotated.Secret)
		}
		for _, k := range keys {
			if err := verifyEd25519(k, d); err != nil {
				t.Errorf("delivery %s with %s: %v", d.EventID, k, err)
			}
		}
		for _, s := range secrets {
			if err := verifySpecLines(s, d); err != nil {
				t.Errorf("delivery %s Service-Signature: %v", d.EventID, err)
			}
		}
	}
	if err := verifyEd25519(*rotated.PublicKey, rc.deliveries()[0]); err == nil {
		t.Error("a delivery before the rotation verifies with the new key")
	}

	// An HMAC endpoint switched to ed25519.
	hm := createEndpoint(t, c, plain.URL)
	switched := patchEndpoint(t, c, hm.ID, map[string]any{"signature_scheme": "ed25519"})
	if switched.PublicKey == nil || switched.SignatureScheme != "ed25519" {
		t.Fatalf("switched endpoint: %+v", switched)
	}
	_, third, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 10*time.Second, "the switched endpoint receives", func() bool { return plain.received()[third] > 0 })
	for _, d := range plain.deliveries() {
		if d.EventID != third {
			continue
		}
		if err := verifyEd25519(*switched.PublicKey, d); err != nil {
			t.Error(err)
		}
		if err := verifySpecLines(hm.Secret, d); err != nil {
			t.Error(err)
		}
	}
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": rc.URL, "event_types": []string{"*"}, "signature_scheme": "rsa"}, nil), 422, "validation-error")
}

// signStandard is the Standard Webhooks signature (v1, by HMAC) the service
// signs body with under secret alone.
func signStandard(secret, id string, t time.Time, body []byte) string {
	var sig string
	domain.NewWebhookSigner(secret).Headers(id, 1, t, body, func(k, v string) {
		if k == domain.StandardSignatureHeader {
			sig = v
		}
	})
	return sig
}
