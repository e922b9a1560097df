package stripefake_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/stripeidentity"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
)

const (
	key    = "sk_test_51FakeKeyForTheHostedPage"
	secret = "whsec_hostedPageTestSecret"
)

// receiver is the service's side: a webhook endpoint that verifies and
// normalises what the fake sends, and a return_url page.
type receiver struct {
	mu      sync.Mutex
	results []stripeidentity.Result
	refused []error
	srv     *httptest.Server
}

func startReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/stripe", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		res, err := stripeidentity.ParseWebhook(body, r.Header.Get(stripeidentity.SignatureHeader), secret, time.Now())
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil && !errors.Is(err, stripeidentity.ErrIgnored) {
			rc.refused = append(rc.refused, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			rc.refused = append(rc.refused, errors.New("content type "+r.Header.Get("Content-Type")))
		}
		rc.results = append(rc.results, res)
	})
	mux.HandleFunc("GET /return", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "back at the service")
	})
	rc.srv = httptest.NewServer(mux)
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() ([]stripeidentity.Result, []error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripeidentity.Result(nil), rc.results...), append([]error(nil), rc.refused...)
}

func setup(t *testing.T) (*stripefake.Server, *stripeidentity.Client, *receiver) {
	t.Helper()
	rc := startReceiver(t)
	f := stripefake.Start(stripefake.Config{SecretKey: key, WebhookURL: rc.srv.URL + "/webhooks/stripe", WebhookSecret: secret})
	t.Cleanup(f.Close)
	c, err := stripeidentity.New(stripeidentity.Config{BaseURL: f.URL, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, rc
}

// noRedirects is a browser without JavaScript that shows each redirect
// instead of following it.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

var buttonForm = regexp.MustCompile(`<button type="submit" name="choice" value="([a-z]+)">`)

func TestHostedPageFlow(t *testing.T) {
	tests := []struct {
		choice   stripefake.Choice
		types    []string
		outcome  stripeidentity.Outcome
		reason   string
		usedOnce bool
	}{
		{stripefake.Verify, []string{stripeidentity.EventProcessing, stripeidentity.EventVerified}, stripeidentity.Passed, "", true},
		{stripefake.Unverified, []string{stripeidentity.EventProcessing, stripeidentity.EventRequiresInput}, stripeidentity.Review, "document_unverified_other", true},
		{stripefake.Decline, []string{stripeidentity.EventRequiresInput}, stripeidentity.Failed, "consent_declined", true},
		{stripefake.Cancel, []string{stripeidentity.EventCanceled}, stripeidentity.Failed, "canceled", true},
		{stripefake.Leave, nil, stripeidentity.Pending, "requires_input", false},
	}
	for _, tc := range tests {
		t.Run(string(tc.choice), func(t *testing.T) {
			f, c, rc := setup(t)
			returnURL := rc.srv.URL + "/return?flow=ds_2hQ8page"
			s, err := c.CreateSession(context.Background(), stripeidentity.CreateParams{
				Reference: "ds_2hQ8page", ReturnURL: returnURL, IdempotencyKey: "create-ds_2hQ8page",
			})
			if err != nil {
				t.Fatal(err)
			}

			page := get(t, s.URL)
			if page.status != http.StatusOK || strings.Contains(page.body, "<script") {
				t.Fatalf("page: %d, script-free %v", page.status, !strings.Contains(page.body, "<script"))
			}
			var offered []string
			for _, m := range buttonForm.FindAllStringSubmatch(page.body, -1) {
				offered = append(offered, m[1])
			}
			if strings.Join(offered, ",") != "verify,unverified,decline,cancel,leave" {
				t.Fatalf("buttons %v", offered)
			}

			res, err := noRedirects.PostForm(s.URL, url.Values{"choice": {string(tc.choice)}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != returnURL {
				t.Fatalf("after the page: %d to %q, want 303 to %q", res.StatusCode, res.Header.Get("Location"), returnURL)
			}
			if back := get(t, res.Header.Get("Location")); back.body != "back at the service" {
				t.Fatalf("return page: %q", back.body)
			}

			results, refused := rc.got()
			if len(refused) > 0 {
				t.Fatalf("the receiver refused: %v", refused)
			}
			var types []string
			for _, r := range results {
				types = append(types, r.EventType)
				if r.SessionID != s.ID || r.Reference != "ds_2hQ8page" || r.Livemode {
					t.Fatalf("event about %s ref %q livemode %v", r.SessionID, r.Reference, r.Livemode)
				}
			}
			if strings.Join(types, ",") != strings.Join(tc.types, ",") {
				t.Fatalf("events %v, want %v", types, tc.types)
			}
			for _, d := range f.Deliveries() {
				if d.Status != http.StatusOK || !strings.HasPrefix(d.Signature, "t=") {
					t.Fatalf("delivery %+v", d)
				}
			}

			got, err := c.RetrieveSession(context.Background(), s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if o, reason := got.Outcome(); o != tc.outcome || reason != tc.reason {
				t.Fatalf("retrieved outcome %s %q, want %s %q", o, reason, tc.outcome, tc.reason)
			}
			if status, _, ok := f.SessionStatus(s.ID); !ok || status != got.Status {
				t.Fatalf("the fake holds %s, the API said %s", status, got.Status)
			}
			if len(results) > 0 {
				if last := results[len(results)-1]; last.Outcome != tc.outcome || last.Reason != tc.reason {
					t.Fatalf("webhook outcome %s %q, want %s %q", last.Outcome, last.Reason, tc.outcome, tc.reason)
				}
			}
			again := get(t, s.URL)
			if tc.usedOnce != (again.status == http.StatusGone) {
				t.Fatalf("revisiting the page: %d", again.status)
			}
		})
	}
}

type page struct {
	status int
	body   string
}

func get(t *testing.T, u string) page {
	t.Helper()
	res, err := noRedirects.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{res.StatusCode, string(b)}
}

func TestResendIsTheSameEventSignedAnew(t *testing.T) {
	f, c, rc := setup(t)
	s, err := c.CreateSession(context.Background(), stripeidentity.CreateParams{Reference: "ds_2hQ8resend", ReturnURL: rc.srv.URL + "/return", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Complete(s.ID, stripefake.Verify); err != nil {
		t.Fatal(err)
	}
	events := f.Events()
	last := events[len(events)-1]
	if status, err := f.Resend(last.ID); err != nil || status != http.StatusOK {
		t.Fatalf("resend: %d %v", status, err)
	}
	results, _ := rc.got()
	if n := len(results); n != 3 || results[1].EventID != results[2].EventID {
		t.Fatalf("%d results; a resend must carry the same event id", n)
	}
}

func TestCancelThroughTheAPISendsAnEvent(t *testing.T) {
	f, c, rc := setup(t)
	s, err := c.CreateSession(context.Background(), stripeidentity.CreateParams{Reference: "ds_2hQ8cancel", ReturnURL: rc.srv.URL + "/return", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelSession(context.Background(), s.ID, "cancel-k"); err != nil {
		t.Fatal(err)
	}
	f.Deliveries() // waits for the webhook sent in the background
	results, _ := rc.got()
	if len(results) != 1 || results[0].EventType != stripeidentity.EventCanceled || results[0].Outcome != stripeidentity.Failed {
		t.Fatalf("results %+v", results)
	}
	if got := get(t, s.URL); got.status != http.StatusGone {
		t.Fatalf("page of a canceled session: %d", got.status)
	}
}

// TestTheFakeRefusesWhatStripeRefuses sends raw requests, bypassing the
// client, to show the fake does check what it is sent.
func TestTheFakeRefusesWhatStripeRefuses(t *testing.T) {
	f, _, _ := setup(t)
	form := "type=document&return_url=https%3A%2F%2Fgiving.example%2Freturn&metadata[reference]=ds_1"
	tests := []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		status       int
		errType      string
		code, param  string
	}{
		{"no key", "POST", "/v1/identity/verification_sessions", form, map[string]string{"Authorization": ""}, 401, "invalid_request_error", "", ""},
		{"key as basic auth", "POST", "/v1/identity/verification_sessions", form, map[string]string{"Authorization": "Basic c2tfdGVzdA=="}, 401, "invalid_request_error", "", ""},
		{"JSON body", "POST", "/v1/identity/verification_sessions", `{"type":"document"}`, map[string]string{"Content-Type": "application/json"}, 400, "invalid_request_error", "", ""},
		{"no idempotency key", "POST", "/v1/identity/verification_sessions", form, map[string]string{"Idempotency-Key": ""}, 400, "invalid_request_error", "", ""},
		{"bad version", "POST", "/v1/identity/verification_sessions", form, map[string]string{"Stripe-Version": "latest"}, 400, "invalid_request_error", "", ""},
		{"unknown parameter", "POST", "/v1/identity/verification_sessions", form + "&donor_phone=%2B15550100199", nil, 400, "invalid_request_error", "parameter_unknown", "donor_phone"},
		{"no type", "POST", "/v1/identity/verification_sessions", "return_url=https%3A%2F%2Fgiving.example%2Freturn", nil, 400, "invalid_request_error", "parameter_missing", "type"},
		{"unknown type", "POST", "/v1/identity/verification_sessions", "type=selfie", nil, 400, "invalid_request_error", "", "type"},
		{"bad return URL", "POST", "/v1/identity/verification_sessions", "type=document&return_url=nowhere", nil, 400, "invalid_request_error", "url_invalid", "return_url"},
		{"unknown session", "GET", "/v1/identity/verification_sessions/vs_nope", "", nil, 404, "invalid_request_error", "resource_missing", "session"},
		{"unknown route", "GET", "/v1/identity/verification_reports", "", nil, 404, "invalid_request_error", "", ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, f.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+key)
			if tc.method == "POST" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Idempotency-Key", "raw-"+string(rune('a'+i)))
			}
			for h, v := range tc.header {
				req.Header.Set(h, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Error struct{ Type, Code, Param, Message string }
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.status || body.Error.Type != tc.errType || body.Error.Code != tc.code || body.Error.Param != tc.param || body.Error.Message == "" {
				t.Fatalf("answer %d %+v", res.StatusCode, body.Error)
			}
			if !strings.HasPrefix(res.Header.Get("Request-Id"), "req_") {
				t.Fatalf("no Request-Id")
			}
		})
	}
}
