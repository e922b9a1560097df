package truv_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
)

// A vector computed outside Go, with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac sandbox-secret
//
// so the construction is checked against an independent HMAC-SHA256, the
// one Truv's demo application uses (server/webhooks.js: "v1=" + hex).
const (
	vectorSecret = "sandbox-secret"
	vectorBody   = `{"webhook_id":"a","event_type":"task-status-updated"}`
	vectorSig    = "v1=db44ebb8393fa84fc230660eb9bf62370aabe697edd2e1bbbdf80b44d6d32cd5"
)

func TestSignMatchesAnIndependentHMAC(t *testing.T) {
	h := truv.Sign(vectorSecret, []byte(vectorBody))
	if got := h.Get("X-WEBHOOK-SIGN"); got != vectorSig {
		t.Errorf("X-WEBHOOK-SIGN = %q, want %q", got, vectorSig)
	}
	if h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "Truv-Webhook-Service/2.0" {
		t.Errorf("headers %v, want Truv's content type and user agent", h)
	}
}

func TestVerifier(t *testing.T) {
	now := time.Date(2026, 11, 28, 21, 10, 0, 0, time.UTC)
	fresh := []byte(`{"webhook_id":"w1","event_type":"task-status-updated","event_created_at":"2026-11-28T21:06:40.123456Z"}`)
	old := []byte(`{"webhook_id":"w1","event_type":"task-status-updated","event_created_at":"2026-11-27T09:00:00Z"}`)
	future := []byte(`{"webhook_id":"w1","event_type":"task-status-updated","event_created_at":"2026-11-29T21:00:00Z"}`)
	header := func(v string) http.Header {
		h := http.Header{}
		if v != "" {
			h.Set("X-Webhook-Sign", v)
		}
		return h
	}
	signed := func(secret string, body []byte) http.Header { return truv.Sign(secret, body) }

	cases := []struct {
		name   string
		v      truv.Verifier
		header http.Header
		body   []byte
		reason string // empty: accepted
	}{
		{"the independent vector", truv.Verifier{Secrets: []string{vectorSecret}}, header(vectorSig), []byte(vectorBody), ""},
		{"signed with the secret", truv.Verifier{Secrets: []string{testSecret}}, signed(testSecret, fresh), fresh, ""},
		{"previous secret during a rotation", truv.Verifier{Secrets: []string{"sandbox-new", testSecret}}, signed(testSecret, fresh), fresh, ""},
		{"header name in Truv's capitals", truv.Verifier{Secrets: []string{vectorSecret}}, http.Header{"X-Webhook-Sign": {vectorSig}}, []byte(vectorBody), ""},
		{"wrong secret", truv.Verifier{Secrets: []string{"sandbox-other"}}, signed(testSecret, fresh), fresh, truv.ReasonMismatch},
		{"no secret configured", truv.Verifier{}, signed(testSecret, fresh), fresh, truv.ReasonMismatch},
		{"tampered body", truv.Verifier{Secrets: []string{vectorSecret}}, header(vectorSig), []byte(`{"webhook_id":"b","event_type":"task-status-updated"}`), truv.ReasonMismatch},
		{"one byte appended", truv.Verifier{Secrets: []string{vectorSecret}}, header(vectorSig), []byte(vectorBody + " "), truv.ReasonMismatch},
		{"no header", truv.Verifier{Secrets: []string{vectorSecret}}, header(""), []byte(vectorBody), truv.ReasonMissing},
		{"no v1= prefix", truv.Verifier{Secrets: []string{vectorSecret}}, header(vectorSig[3:]), []byte(vectorBody), truv.ReasonMalformed},
		{"another scheme version", truv.Verifier{Secrets: []string{vectorSecret}}, header("v2=" + vectorSig[3:]), []byte(vectorBody), truv.ReasonMalformed},
		{"truncated digest", truv.Verifier{Secrets: []string{vectorSecret}}, header(vectorSig[:40]), []byte(vectorBody), truv.ReasonMalformed},
		{"not hex", truv.Verifier{Secrets: []string{vectorSecret}}, header("v1=" + string(make([]byte, 64))), []byte(vectorBody), truv.ReasonMalformed},
		{"old event, no age limit", truv.Verifier{Secrets: []string{testSecret}, Now: func() time.Time { return now }}, signed(testSecret, old), old, ""},
		{"old event past the age limit", truv.Verifier{Secrets: []string{testSecret}, MaxAge: time.Hour, Now: func() time.Time { return now }}, signed(testSecret, old), old, truv.ReasonStale},
		{"event from the future", truv.Verifier{Secrets: []string{testSecret}, MaxAge: time.Hour, Now: func() time.Time { return now }}, signed(testSecret, future), future, truv.ReasonStale},
		{"fresh event within the age limit", truv.Verifier{Secrets: []string{testSecret}, MaxAge: time.Hour, Now: func() time.Time { return now }}, signed(testSecret, fresh), fresh, ""},
		{"stale but also forged", truv.Verifier{Secrets: []string{testSecret}, MaxAge: time.Hour, Now: func() time.Time { return now }}, signed("sandbox-other", old), old, truv.ReasonMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Verify(tc.header, tc.body)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, truv.ErrBadSignature) {
				t.Fatalf("err = %v, want ErrBadSignature", err)
			}
			var se *truv.SignatureError
			if !errors.As(err, &se) || se.Reason != tc.reason {
				t.Errorf("err = %v, want reason %s", err, tc.reason)
			}
		})
	}
}
