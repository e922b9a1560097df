package stripeidentity_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/stripeidentity"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
)

const testKey = "sk_test_51FakeKeyForTheLoopbackFake"

func startFake(t *testing.T) *stripefake.Server {
	t.Helper()
	f := stripefake.Start(stripefake.Config{SecretKey: testKey, WebhookSecret: fixtureSecret})
	t.Cleanup(f.Close)
	return f
}

func newClient(t *testing.T, base string, timeout time.Duration) *stripeidentity.Client {
	t.Helper()
	c, err := stripeidentity.New(stripeidentity.Config{BaseURL: base, SecretKey: testKey, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createParams(key string) stripeidentity.CreateParams {
	return stripeidentity.CreateParams{
		Reference:      "ds_2hQ8clientTest",
		ReturnURL:      "https://giving.example/flow/ds_2hQ8clientTest/identity/return",
		IdempotencyKey: key,
		Metadata:       map[string]string{"church": "ch_2hQ8church", "donor": "dn_2hQ8donor"},
	}
}

func TestCreateSessionSendsWhatStripeDocuments(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 0)
	s, err := c.CreateSession(context.Background(), createParams("create-ds_2hQ8clientTest"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.ID, "vs_") || s.Status != stripeidentity.StatusRequiresInput || s.Reference != "ds_2hQ8clientTest" || s.Livemode {
		t.Fatalf("session %+v", s)
	}
	if !strings.HasPrefix(s.URL, f.URL+"/start/") {
		t.Fatalf("url %q is not the fake's hosted page", s.URL)
	}
	if o, _ := s.Outcome(); o != stripeidentity.Pending {
		t.Fatalf("a new session is %s, want pending", o)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Status != http.StatusOK || r.Method != http.MethodPost || r.Path != "/v1/identity/verification_sessions" {
		t.Fatalf("request %s %s answered %d (%s)", r.Method, r.Path, r.Status, r.Refusal)
	}
	for h, want := range map[string]string{
		"Authorization":   "Bearer " + testKey,
		"Content-Type":    "application/x-www-form-urlencoded",
		"Idempotency-Key": "create-ds_2hQ8clientTest",
		"Stripe-Version":  stripeidentity.APIVersion,
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	want := url.Values{
		"type":                {"document"},
		"return_url":          {"https://giving.example/flow/ds_2hQ8clientTest/identity/return"},
		"metadata[reference]": {"ds_2hQ8clientTest"},
		"metadata[church]":    {"ch_2hQ8church"},
		"metadata[donor]":     {"dn_2hQ8donor"},
	}
	if r.Form.Encode() != want.Encode() {
		t.Fatalf("form\n%s\nwant\n%s", r.Form.Encode(), want.Encode())
	}
}

func TestCreateSessionRetryIsIdempotent(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 0)
	first, err := c.CreateSession(context.Background(), createParams("same-key"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateSession(context.Background(), createParams("same-key"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.URL != first.URL {
		t.Fatalf("retry created %s, first was %s", again.ID, first.ID)
	}
	p := createParams("same-key")
	p.Reference = "ds_2hQ8another"
	_, err = c.CreateSession(context.Background(), p)
	var se *stripeidentity.Error
	if !errors.Is(err, stripeidentity.ErrRefused) || !errors.As(err, &se) || se.Type != "idempotency_error" {
		t.Fatalf("same key, other parameters: err = %v", err)
	}
}

func TestRetrieveGivesAFreshURLAfterAFailedAttempt(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 0)
	s, err := c.CreateSession(context.Background(), createParams("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Complete(s.ID, stripefake.Unverified); err != nil {
		t.Fatal(err)
	}
	got, err := c.RetrieveSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o, reason := got.Outcome(); o != stripeidentity.Review || reason != "document_unverified_other" {
		t.Fatalf("outcome %s %s", o, reason)
	}
	if got.URL == "" || got.URL == s.URL {
		t.Fatalf("retrieve gave url %q after the first %q was used", got.URL, s.URL)
	}
	if got.LastError == nil || got.LastError.Reason == "" {
		t.Fatalf("last_error %+v", got.LastError)
	}
	r := f.Requests()[1]
	if r.Method != http.MethodGet || r.Header.Get("Idempotency-Key") != "" || r.Header.Get("Content-Type") != "" || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("retrieve sent %s with headers %v", r.Method, r.Header)
	}
}

func TestCancelSession(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 0)
	s, err := c.CreateSession(context.Background(), createParams("k1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.CancelSession(context.Background(), s.ID, "cancel-"+s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o, reason := got.Outcome(); o != stripeidentity.Failed || reason != "canceled" || got.URL != "" {
		t.Fatalf("canceled session: %s %s url %q", o, reason, got.URL)
	}
	_, err = c.CancelSession(context.Background(), s.ID, "cancel-again-"+s.ID)
	if !errors.Is(err, stripeidentity.ErrRefused) {
		t.Fatalf("canceling a canceled session: err = %v", err)
	}
}

func TestErrorsSayWhetherStripeRefusedOrWasUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		failure stripefake.Failure
		refused bool
		code    string
	}{
		{"invalid request", stripefake.Failure{Status: 400, Type: "invalid_request_error", Code: "parameter_invalid_empty", Param: "return_url", Message: "You passed an empty string for 'return_url'."}, true, "parameter_invalid_empty"},
		{"unauthorized", stripefake.Failure{Status: 401, Type: "invalid_request_error", Message: "Invalid API Key provided."}, true, ""},
		{"forbidden", stripefake.Failure{Status: 403, Type: "invalid_request_error", Message: "The provided key does not have access."}, true, ""},
		{"not found", stripefake.Failure{Status: 404, Type: "invalid_request_error", Code: "resource_missing"}, true, "resource_missing"},
		{"conflict", stripefake.Failure{Status: 409, Type: "idempotency_error", Code: "idempotency_key_in_use"}, false, "idempotency_key_in_use"},
		{"rate limited", stripefake.Failure{Status: 429, Type: "invalid_request_error", Code: "rate_limit"}, false, "rate_limit"},
		{"server error", stripefake.Failure{Status: 500, Type: "api_error"}, false, ""},
		{"bad gateway without Stripe's body", stripefake.Failure{Status: 502, Body: "<html>bad gateway</html>"}, false, ""},
		{"lock timeout Stripe asks to retry", stripefake.Failure{Status: 400, Type: "invalid_request_error", Code: "lock_timeout", ShouldRetry: "true"}, false, "lock_timeout"},
		{"success that is not a session", stripefake.Failure{Status: 200, Body: `{"object":"customer","id":"cus_1"}`}, false, ""},
		{"success that is not JSON", stripefake.Failure{Status: 200, Body: `<html></html>`}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t)
			c := newClient(t, f.URL, 0)
			f.FailNext(tc.failure)
			_, err := c.CreateSession(context.Background(), createParams("k1"))
			var se *stripeidentity.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if errors.Is(err, stripeidentity.ErrRefused) != tc.refused || errors.Is(err, stripeidentity.ErrUnavailable) == tc.refused {
				t.Fatalf("err = %v: refused %v, want %v", err, errors.Is(err, stripeidentity.ErrRefused), tc.refused)
			}
			if se.HTTPStatus != tc.failure.Status || se.Code != tc.code || se.Type != tc.failure.Type || se.Message != tc.failure.Message || se.Param != tc.failure.Param {
				t.Fatalf("error %+v does not carry Stripe's answer %+v", se, tc.failure)
			}
			if !strings.HasPrefix(se.RequestID, "req_") || !strings.Contains(err.Error(), se.RequestID) {
				t.Fatalf("request id %q missing from %v", se.RequestID, err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error shows the key: %v", err)
			}
		})
	}
}

func TestRealRefusalsOfTheFake(t *testing.T) {
	f := startFake(t)
	ctx := context.Background()
	wrongKey, err := stripeidentity.New(stripeidentity.Config{BaseURL: f.URL, SecretKey: "sk_test_notTheFakesKey"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrongKey.CreateSession(ctx, createParams("k1"))
	var se *stripeidentity.Error
	if !errors.As(err, &se) || !se.Refused || se.HTTPStatus != http.StatusUnauthorized {
		t.Fatalf("wrong key: err = %v", err)
	}
	if strings.Contains(err.Error(), "sk_test_notTheFakesKey") {
		t.Fatalf("error shows the key: %v", err)
	}
	_, err = newClient(t, f.URL, 0).RetrieveSession(ctx, "vs_doesNotExist")
	if !errors.As(err, &se) || !se.Refused || se.HTTPStatus != http.StatusNotFound || se.Code != "resource_missing" {
		t.Fatalf("unknown session: err = %v", err)
	}
}

func TestUnavailableWhenStripeIsSlowOrGone(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 100*time.Millisecond)
	f.FailNext(stripefake.Failure{Status: 200, Delay: 500 * time.Millisecond})
	_, err := c.CreateSession(context.Background(), createParams("k1"))
	if !errors.Is(err, stripeidentity.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow Stripe: err = %v", err)
	}

	gone := stripefake.Start(stripefake.Config{SecretKey: testKey})
	base := gone.URL
	gone.Close()
	_, err = newClient(t, base, 0).RetrieveSession(context.Background(), "vs_1")
	var se *stripeidentity.Error
	if !errors.Is(err, stripeidentity.ErrUnavailable) || !errors.As(err, &se) || se.HTTPStatus != 0 || se.Err == nil {
		t.Fatalf("closed port: err = %v", err)
	}
}

func TestParametersAreCheckedBeforeAnythingIsSent(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, 0)
	with := func(change func(*stripeidentity.CreateParams)) stripeidentity.CreateParams {
		p := createParams("k1")
		change(&p)
		return p
	}
	for name, p := range map[string]stripeidentity.CreateParams{
		"no reference":               with(func(p *stripeidentity.CreateParams) { p.Reference = "" }),
		"a phone as reference":       with(func(p *stripeidentity.CreateParams) { p.Reference = "+1 (555) 010-0199" }),
		"a bare phone in metadata":   with(func(p *stripeidentity.CreateParams) { p.Metadata["contact"] = "5550100199" }),
		"a local phone in metadata":  with(func(p *stripeidentity.CreateParams) { p.Metadata["contact"] = "(555) 010-0199" }),
		"an email in metadata":       with(func(p *stripeidentity.CreateParams) { p.Metadata["contact"] = "donor@example.org" }),
		"reference twice":            with(func(p *stripeidentity.CreateParams) { p.Metadata["reference"] = "x" }),
		"bracketed key":              with(func(p *stripeidentity.CreateParams) { p.Metadata["a[b]"] = "x" }),
		"long key":                   with(func(p *stripeidentity.CreateParams) { p.Metadata[strings.Repeat("k", 41)] = "x" }),
		"long value":                 with(func(p *stripeidentity.CreateParams) { p.Metadata["k"] = strings.Repeat("v", 501) }),
		"relative return URL":        with(func(p *stripeidentity.CreateParams) { p.ReturnURL = "/flow/return" }),
		"no idempotency key":         with(func(p *stripeidentity.CreateParams) { p.IdempotencyKey = "" }),
		"idempotency key with space": with(func(p *stripeidentity.CreateParams) { p.IdempotencyKey = "a b" }),
	} {
		if _, err := c.CreateSession(context.Background(), p); !errors.Is(err, stripeidentity.ErrInvalidParams) {
			t.Errorf("%s: err = %v, want ErrInvalidParams", name, err)
		}
	}
	if _, err := c.RetrieveSession(context.Background(), "../v1/customers"); !errors.Is(err, stripeidentity.ErrInvalidParams) {
		t.Errorf("retrieve with a path: err = %v", err)
	}
	if _, err := c.CancelSession(context.Background(), "vs_1", ""); !errors.Is(err, stripeidentity.ErrInvalidParams) {
		t.Errorf("cancel without a key: err = %v", err)
	}
	if n := len(f.Requests()); n != 0 {
		t.Fatalf("%d requests reached Stripe", n)
	}
}

func TestNewChecksTheConfiguration(t *testing.T) {
	for name, cfg := range map[string]stripeidentity.Config{
		"no key":          {},
		"publishable key": {SecretKey: "pk_test_abc"},
		"webhook secret":  {SecretKey: "whsec_abc"},
		"bad base URL":    {SecretKey: testKey, BaseURL: "api.stripe.com"},
	} {
		if _, err := stripeidentity.New(cfg); !errors.Is(err, stripeidentity.ErrInvalidParams) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for _, key := range []string{"sk_live_abc", "sk_test_abc", "rk_live_abc", "rk_test_abc"} {
		if _, err := stripeidentity.New(stripeidentity.Config{SecretKey: key}); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}
