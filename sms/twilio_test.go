package sms_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/partnergiving/giving/sms"
)

// fakeTwilio is a local stand-in for Twilio Verify: it checks every request's
// shape and credentials the way Twilio does, keeps one pending code per
// phone, and records what it was asked.
type fakeTwilio struct {
	t       *testing.T
	mu      sync.Mutex
	pending map[string]string // phone → code
	calls   []string
	// failWith makes the next request fail with this status and body.
	failWith int
	failBody string
}

const (
	accountSID = "AC0123456789abcdef0123456789abcdef"
	authToken  = "token-secret"
	serviceSID = "VA0123456789abcdef0123456789abcdef"
)

func (f *fakeTwilio) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	user, pass, ok := r.BasicAuth()
	if !ok || user != accountSID || pass != authToken {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":20003,"message":"Authenticate","status":401}`))
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		f.t.Errorf("want a form POST, got %s with %q", r.Method, r.Header.Get("Content-Type"))
	}
	if err := r.ParseForm(); err != nil {
		f.t.Errorf("parse form: %v", err)
	}
	f.calls = append(f.calls, r.URL.Path+"?"+r.PostForm.Encode())
	if f.failWith != 0 {
		w.WriteHeader(f.failWith)
		_, _ = w.Write([]byte(f.failBody))
		f.failWith = 0
		return
	}
	to := r.PostForm.Get("To")
	switch r.URL.Path {
	case "/v2/Services/" + serviceSID + "/Verifications":
		if r.PostForm.Get("Channel") != "sms" || !strings.HasPrefix(to, "+") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":60200,"message":"Invalid parameter To: ` + to + `","status":400}`))
			return
		}
		f.pending[to] = "123456"
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"sid": "VE1", "to": to, "channel": "sms", "status": "pending", "valid": false})
	case "/v2/Services/" + serviceSID + "/VerificationCheck":
		code, ok := f.pending[to]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":20404,"message":"The requested resource was not found","status":404}`))
			return
		}
		status := "pending"
		if r.PostForm.Get("Code") == code {
			status = "approved"
			delete(f.pending, to)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"sid": "VE1", "to": to, "status": status, "valid": status == "approved"})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestTwilioVerify(t *testing.T) {
	fake := &fakeTwilio{t: t, pending: map[string]string{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx := context.Background()
	tw, err := sms.NewTwilio(sms.TwilioConfig{BaseURL: srv.URL, AccountSID: accountSID, AuthToken: authToken, ServiceSID: serviceSID})
	if err != nil {
		t.Fatal(err)
	}
	const phone = "+12025550100"

	// No pending verification yet: Twilio answers 404, which is a wrong code.
	if ok, err := tw.Check(ctx, phone, "123456"); ok || err != nil {
		t.Fatalf("check before send = %v, %v; want false, nil", ok, err)
	}
	if err := tw.Send(ctx, phone); err != nil {
		t.Fatalf("send: %v", err)
	}
	if ok, err := tw.Check(ctx, phone, "999999"); ok || err != nil {
		t.Fatalf("wrong code = %v, %v", ok, err)
	}
	if ok, err := tw.Check(ctx, phone, "123456"); !ok || err != nil {
		t.Fatalf("right code = %v, %v", ok, err)
	}
	want := []string{
		"/v2/Services/" + serviceSID + "/VerificationCheck?Code=123456&To=%2B12025550100",
		"/v2/Services/" + serviceSID + "/Verifications?Channel=sms&To=%2B12025550100",
		"/v2/Services/" + serviceSID + "/VerificationCheck?Code=999999&To=%2B12025550100",
		"/v2/Services/" + serviceSID + "/VerificationCheck?Code=123456&To=%2B12025550100",
	}
	if strings.Join(fake.calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(fake.calls, "\n"), strings.Join(want, "\n"))
	}

	// A failure is an error naming the status and Twilio's code, never the
	// message, which can quote the phone.
	fake.failWith, fake.failBody = http.StatusBadRequest, `{"code":60200,"message":"Invalid parameter To: +12025550100","status":400}`
	err = tw.Send(ctx, phone)
	if err == nil || !strings.Contains(err.Error(), "60200") || strings.Contains(err.Error(), "2025550100") {
		t.Fatalf("send failure: %v", err)
	}
	fake.failWith, fake.failBody = http.StatusInternalServerError, `oops`
	if _, err := tw.Check(ctx, phone, "123456"); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("check failure: %v", err)
	}

	// Wrong credentials are refused by Twilio and surface as an error.
	bad, _ := sms.NewTwilio(sms.TwilioConfig{BaseURL: srv.URL, AccountSID: accountSID, AuthToken: "wrong", ServiceSID: serviceSID})
	if err := bad.Send(ctx, phone); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad credentials: %v", err)
	}
	if _, err := sms.NewTwilio(sms.TwilioConfig{AccountSID: accountSID}); err == nil {
		t.Fatal("an incomplete config was accepted")
	}
}

func TestSandboxAcceptsOnlyTheFixedCode(t *testing.T) {
	var v sms.Verifier = sms.Sandbox{}
	if err := v.Send(context.Background(), "+12025550100"); err != nil {
		t.Fatal(err)
	}
	for code, want := range map[string]bool{"000000": true, "123456": false, "": false, "0000000": false} {
		if got, _ := v.Check(context.Background(), "+12025550100", code); got != want {
			t.Errorf("code %q: %v, want %v", code, got, want)
		}
	}
}
