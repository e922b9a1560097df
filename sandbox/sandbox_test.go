package sandbox_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/sandbox"
)

// The receiver verifies signature and age, answers 401 to a bad delivery,
// acts once per event_id and says so in its log.
func TestReceiverVerifiesAndDeduplicates(t *testing.T) {
	var log bytes.Buffer
	r, err := sandbox.Listen("127.0.0.1:0", &log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	body := []byte(`{"event_id":"evt_1","event_type":"enrollment.activated","occurred_at":"2026-11-21T10:04:05.123Z","church_id":"ch_1","payload":{"enrollment_id":"en_1"}}`)
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr()+"/hooks", bytes.NewReader(body))
		req.Header.Set("Service-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// sign is the Service-Signature the service's signer puts on body at t.
	sign := func(secret string, at time.Time) string {
		h := http.Header{}
		domain.NewWebhookSigner(secret).Headers("evt_1", 1, at, body, h.Add)
		return h.Get(domain.WebhookSignatureHeader)
	}
	secret := "whsec_test"
	if code := post(sign(secret, time.Now())); code != http.StatusUnauthorized {
		t.Fatalf("before the secret is set: %d", code)
	}
	r.SetSecret(secret)
	for _, sig := range []string{
		sign("whsec_other", time.Now()),
		sign(secret, time.Now().Add(-10*time.Minute)),
		"",
	} {
		if code := post(sig); code != http.StatusUnauthorized {
			t.Fatalf("signature %q: %d", sig, code)
		}
	}
	for range 2 {
		if code := post(sign(secret, time.Now())); code != http.StatusOK {
			t.Fatalf("a good delivery: %d", code)
		}
	}
	deliveries, unique, dups := r.Counts()
	if deliveries != 2 || unique != 1 || dups != 1 {
		t.Fatalf("counts %d %d %d", deliveries, unique, dups)
	}
	if _, err := r.Await(context.Background(), time.Second, func(e sandbox.Event) bool { return e.ID == "evt_1" && bytes.Equal(e.Raw, body) }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"refused a delivery to /hooks: no secret", "verified enrollment.activated evt_1\n" + string(body), "evt_1 again: a duplicate, ignored"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// Addresses without a scheme, and session urls that are not, are named.
func TestURLMistakes(t *testing.T) {
	if _, err := sandbox.AbsoluteURL("127.0.0.1:8080"); err == nil || !strings.Contains(err.Error(), "did you mean http://127.0.0.1:8080?") {
		t.Fatalf("no scheme: %v", err)
	}
	if u, err := sandbox.AbsoluteURL("https://sandbox.example/"); err != nil || u.Host != "sandbox.example" {
		t.Fatalf("a good URL: %v", err)
	}
	for flow, base := range map[string]string{
		"http://127.0.0.1:8080/flow/abc":         "http://127.0.0.1:8080",
		"https://giving.example/pg/flow/abc?x=1": "https://giving.example/pg",
	} {
		if got, err := sandbox.FlowBase(flow); err != nil || got != base {
			t.Errorf("FlowBase(%q) = %q, %v; want %q", flow, got, err, base)
		}
	}
	for _, bad := range []string{"http://127.0.0.1:8080/v1/donor_sessions", "http://127.0.0.1:8080/flow/", "127.0.0.1:8080/flow/abc"} {
		if _, err := sandbox.FlowBase(bad); err == nil || !strings.Contains(err.Error(), "is not a donor session's url") {
			t.Errorf("FlowBase(%q): %v", bad, err)
		}
	}
}

// During a rotation's overlap a delivery carries a Service-Signature line
// per secret: the receiver accepts it holding either secret or both, and
// refuses it when a line is malformed or no line verifies.
func TestReceiverVerifiesEveryLineDuringARotation(t *testing.T) {
	r, err := sandbox.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	previous, current := domain.GenerateWebhookSecret(), domain.GenerateWebhookSecret()
	sign := domain.NewWebhookSigner(current).WithPrevious(domain.NewWebhookSigner(previous), time.Now().Add(time.Minute))
	n := 0
	post := func(extra string) int {
		n++
		body := []byte(`{"event_id":"evt_` + strconv.Itoa(n) + `","event_type":"enrollment.activated","occurred_at":"2026-11-21T10:04:05.123Z","church_id":"ch_1","payload":{"enrollment_id":"en_1"}}`)
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.Addr()+"/hooks", bytes.NewReader(body))
		sign.Headers("evt_"+strconv.Itoa(n), 1, time.Now(), body, req.Header.Add)
		if extra != "" {
			req.Header.Add(domain.WebhookSignatureHeader, extra)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, held := range map[string][]string{"previous": {previous}, "new": {current}, "both": {previous, current}} {
		r.SetSecret(held...)
		if code := post(""); code != http.StatusOK {
			t.Errorf("holding the %s secret: %d", name, code)
		}
		if code := post("t=1,v1=zz"); code != http.StatusUnauthorized {
			t.Errorf("holding the %s secret, a malformed line: %d", name, code)
		}
	}
	r.SetSecret(domain.GenerateWebhookSecret())
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("holding neither secret: %d", code)
	}
}
