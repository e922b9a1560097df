package increase_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/partnergiving/giving/vendors/increase"
)

// The fixture: a webhook as Increase would send it, signed outside Go (with
// Python's hmac and base64 modules) following the scheme Increase's SDKs
// verify: base64(HMAC-SHA256(secret, "<webhook-id>.<webhook-timestamp>.<body>")).
const (
	fixtureSecret    = "partner-giving-fixture-secret"
	fixtureID        = "event_001dzz0r20rzr4zrhrr1364hy80"
	fixtureTimestamp = "1669680000" // 2022-11-29T00:00:00Z
	fixtureBody      = `{"id":"event_001dzz0r20rzr4zrhrr1364hy80","created_at":"2022-11-29T00:00:00Z","category":"inbound_ach_transfer.created","associated_object_type":"inbound_ach_transfer","associated_object_id":"inbound_ach_transfer_tdrwqr3fq9gnnq49odev","type":"event"}`
	fixtureSignature = "v1,ymFYvB37I+OiPaYDYpSmS+8mk12T1/fe0awFsa1nS7I="
)

var fixtureTime = time.Unix(1669680000, 0)

func fixtureHeader(mutate func(h http.Header)) http.Header {
	h := http.Header{}
	h.Set("webhook-id", fixtureID)
	h.Set("webhook-timestamp", fixtureTimestamp)
	h.Set("webhook-signature", fixtureSignature)
	if mutate != nil {
		mutate(h)
	}
	return h
}

func TestVerify(t *testing.T) {
	secret := []byte(fixtureSecret)
	tests := []struct {
		name   string
		secret []byte
		header http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"documented scheme", secret, fixtureHeader(nil), fixtureBody, fixtureTime, nil},
		{"four minutes late", secret, fixtureHeader(nil), fixtureBody, fixtureTime.Add(4 * time.Minute), nil},
		{"exactly at the tolerance", secret, fixtureHeader(nil), fixtureBody, fixtureTime.Add(increase.Tolerance), nil},
		{"clock four minutes behind", secret, fixtureHeader(nil), fixtureBody, fixtureTime.Add(-4 * time.Minute), nil},
		{"one of several signatures", secret, fixtureHeader(func(h http.Header) {
			h.Set("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= "+fixtureSignature)
		}), fixtureBody, fixtureTime, nil},
		{"other schemes skipped", secret, fixtureHeader(func(h http.Header) {
			h.Set("webhook-signature", "v1a,c29tZSBlZDI1NTE5IHNpZ25hdHVyZQ== "+fixtureSignature)
		}), fixtureBody, fixtureTime, nil},
		{"wrong secret", []byte("another-secret"), fixtureHeader(nil), fixtureBody, fixtureTime, increase.ErrSignatureInvalid},
		{"secret with a whsec_ prefix is a different key", []byte("whsec_" + fixtureSecret), fixtureHeader(nil), fixtureBody, fixtureTime, increase.ErrSignatureInvalid},
		{"tampered body", secret, fixtureHeader(nil), `{"id":"event_001dzz0r20rzr4zrhrr1364hy80","created_at":"2022-11-29T00:00:00Z","category":"inbound_ach_transfer.created","associated_object_type":"inbound_ach_transfer","associated_object_id":"inbound_ach_transfer_attacker000000000000","type":"event"}`, fixtureTime, increase.ErrSignatureInvalid},
		{"body with a trailing newline", secret, fixtureHeader(nil), fixtureBody + "\n", fixtureTime, increase.ErrSignatureInvalid},
		{"tampered id", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-id", "event_other") }), fixtureBody, fixtureTime, increase.ErrSignatureInvalid},
		{"tampered timestamp", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-timestamp", "1669680001") }), fixtureBody, fixtureTime, increase.ErrSignatureInvalid},
		{"expired", secret, fixtureHeader(nil), fixtureBody, fixtureTime.Add(increase.Tolerance + time.Second), increase.ErrTimestampTooOld},
		{"from the future", secret, fixtureHeader(nil), fixtureBody, fixtureTime.Add(-increase.Tolerance - time.Second), increase.ErrTimestampTooNew},
		{"timestamp in RFC 3339", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-timestamp", "2022-11-29T00:00:00Z") }), fixtureBody, fixtureTime, increase.ErrMalformedHeader},
		{"timestamp with a fraction", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-timestamp", "1669680000.5") }), fixtureBody, fixtureTime, increase.ErrMalformedHeader},
		{"no webhook-id", secret, fixtureHeader(func(h http.Header) { h.Del("webhook-id") }), fixtureBody, fixtureTime, increase.ErrMissingHeader},
		{"no webhook-timestamp", secret, fixtureHeader(func(h http.Header) { h.Del("webhook-timestamp") }), fixtureBody, fixtureTime, increase.ErrMissingHeader},
		{"no webhook-signature", secret, fixtureHeader(func(h http.Header) { h.Del("webhook-signature") }), fixtureBody, fixtureTime, increase.ErrMissingHeader},
		{"only another scheme", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-signature", "v2,"+fixtureSignature[3:]) }), fixtureBody, fixtureTime, increase.ErrSignatureMissing},
		{"signature without a version", secret, fixtureHeader(func(h http.Header) { h.Set("webhook-signature", fixtureSignature[3:]) }), fixtureBody, fixtureTime, increase.ErrSignatureMissing},
		{"signature in hex", secret, fixtureHeader(func(h http.Header) {
			h.Set("webhook-signature", "v1,ca6158bc1dfb23e3a23da6036294a64bef26935d93d7f7ded1ac05b1ad674bb2")
		}), fixtureBody, fixtureTime, increase.ErrSignatureInvalid},
		{"no secret configured", nil, fixtureHeader(nil), fixtureBody, fixtureTime, increase.ErrNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := increase.Verify(tt.secret, tt.header, []byte(tt.body), tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if tt.want != nil && !errors.Is(err, increase.ErrInvalidSignature) {
				t.Fatalf("%v is not an ErrInvalidSignature", err)
			}
		})
	}
}

func TestSignReproducesFixture(t *testing.T) {
	h := increase.Sign([]byte(fixtureSecret), fixtureID, []byte(fixtureBody), fixtureTime)
	for name, want := range map[string]string{"webhook-id": fixtureID, "webhook-timestamp": fixtureTimestamp, "webhook-signature": fixtureSignature} {
		if got := h.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestInteroperatesWithStandardWebhooks checks both directions against the
// Standard Webhooks library, which Increase's Go SDK uses to verify: what it
// signs this package accepts, and what this package signs it accepts. The
// secret goes to the library as Increase's SDK passes it, "whsec_" and the
// base64 of the raw secret.
func TestInteroperatesWithStandardWebhooks(t *testing.T) {
	secret := []byte("a secret with spaces\nand a newline")
	lib, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(fixtureBody)
	now := time.Now()

	sig, err := lib.Sign("msg_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_1")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	if err := increase.Verify(secret, h, body, now); err != nil {
		t.Errorf("Verify of the library's signature: %v", err)
	}

	sdkStyle, err := standardwebhooks.NewWebhook("whsec_" + "YSBzZWNyZXQgd2l0aCBzcGFjZXMKYW5kIGEgbmV3bGluZQ==")
	if err != nil {
		t.Fatal(err)
	}
	if err := sdkStyle.Verify(body, increase.Sign(secret, "msg_2", body, now)); err != nil {
		t.Errorf("the library refuses Sign's headers: %v", err)
	}
	if err := sdkStyle.Verify(append(body, ' '), increase.Sign(secret, "msg_2", body, now)); err == nil {
		t.Error("the library accepts a tampered body, so the comparison above proves nothing")
	}
}
