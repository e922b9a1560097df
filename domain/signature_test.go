package domain_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// serviceSignature is the Service-Signature the service's signer puts on a
// delivery of body at t.
func serviceSignature(secret string, at time.Time, body []byte) (sig string) {
	domain.NewWebhookSigner(secret).Headers("evt_1", 1, at, body, func(k, v string) {
		if k == domain.WebhookSignatureHeader {
			sig = v
		}
	})
	return sig
}

func TestServiceSignatureKnownVector(t *testing.T) {
	// Computed independently: HMAC-SHA256 keyed "whsec_test_secret" over
	// `1795255445.{"event_id":"evt_1"}`.
	at := time.Unix(1795255445, 0)
	body := []byte(`{"event_id":"evt_1"}`)
	got := serviceSignature("whsec_test_secret", at, body)
	want := "t=1795255445,v1=ec316d44ddbea6f3d5d4ce7cea256b1427bc1fbf9160437a5ae2918d0394b20e"
	if got != want {
		t.Fatalf("Service-Signature = %s, want %s", got, want)
	}
	if err := domain.VerifySignature(got, []byte("whsec_test_secret"), body, at.Add(domain.SignatureTolerance)); err != nil {
		t.Fatalf("a signature at the edge of the tolerance: %v", err)
	}
	// Each failure is ErrBadSignature, with its reason for the log.
	for name, c := range map[string]struct {
		check  func() error
		reason string
	}{
		"stale": {func() error {
			return domain.VerifySignature(got, []byte("whsec_test_secret"), body, at.Add(domain.SignatureTolerance+time.Second))
		}, "timestamp 301s from now"},
		"other key":  {func() error { return domain.VerifySignature(got, []byte("whsec_other"), body, at) }, "HMAC does not match"},
		"other body": {func() error { return domain.VerifySignature(got, []byte("whsec_test_secret"), []byte(`{}`), at) }, "HMAC does not match"},
		"malformed":  {func() error { return domain.VerifySignature("v1="+got, []byte("whsec_test_secret"), body, at) }, "header missing"},
	} {
		err := c.check()
		if !errors.Is(err, domain.ErrBadSignature) || !strings.Contains(fmt.Sprint(err), c.reason) {
			t.Errorf("%s: %v, want ErrBadSignature with %q", name, err, c.reason)
		}
	}
}

func TestSignStandardKnownVector(t *testing.T) {
	// The Standard Webhooks specification's example: its secret, message id,
	// timestamp and payload, and the signature it publishes.
	got := domain.SignStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if got != want {
		t.Fatalf("SignStandard = %s, want %s", got, want)
	}
	h := map[string]string{}
	domain.NewWebhookSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").Headers("evt_1", 3, time.Unix(1614265330, 0), []byte(`{}`), func(k, v string) { h[k] = v })
	if h["webhook-id"] != "evt_1" || h["webhook-timestamp"] != "1614265330" || h["Service-Webhook-Attempt"] != "3" || !strings.HasPrefix(h["Service-Signature"], "t=1614265330,v1=") {
		t.Fatalf("headers: %v", h)
	}
	// A signer's keys are made ready once and each signature starts from a
	// copy of their state: every signature, the first and the later ones
	// and those made at once, is the specification's and an HMAC computed
	// afresh here.
	sign := domain.NewWebhookSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	mac := hmac.New(sha256.New, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	mac.Write([]byte("1614265330."))
	mac.Write(body)
	service := "t=1614265330,v1=" + hex.EncodeToString(mac.Sum(nil))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				got := map[string]string{}
				sign.Headers("msg_p5jXN8AQM9LWM0D4loKWxJek", 1, at, body, func(k, v string) { got[k] = v })
				if got["webhook-signature"] != want || got["Service-Signature"] != service {
					t.Errorf("signer's headers %v, want webhook-signature %s and Service-Signature %s", got, want, service)
				}
			}
		})
	}
	wg.Wait()
}
