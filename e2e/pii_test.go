package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// phoneForms are the ways a US number can be written, for the PII sweep.
func phoneForms(e164 string) []string {
	n := strings.TrimPrefix(e164, "+1") // 10 digits
	a, b, c := n[:3], n[3:6], n[6:]
	return []string{
		e164, n, "1" + n,
		a + "-" + b + "-" + c, a + " " + b + " " + c, a + "." + b + "." + c,
		"(" + a + ") " + b + "-" + c, "(" + a + ")" + b + "-" + c,
		"+1 " + a + " " + b + " " + c, "+1-" + a + "-" + b + "-" + c, "+1 (" + a + ") " + b + "-" + c,
		"%2B1" + n, `\u002b1` + n,
	}
}

// onlyDigits keeps the digits of s, so that a phone written with any
// separators shows up as its plain digits.
func onlyDigits(s []byte) []byte {
	out := make([]byte, 0, len(s)/4)
	for _, c := range s {
		if c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	return out
}

// errorer is the part of testing.T the sweep reports to.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// countErrors counts what a sweep reports, to prove the sweep can see.
type countErrors struct{ n int }

func (c *countErrors) Helper()               {}
func (c *countErrors) Errorf(string, ...any) { c.n++ }

// sweep fails if any phone appears in data, in any formatting.
func sweep(t errorer, where string, data []byte, phones []string) {
	t.Helper()
	digits := onlyDigits(data)
	for _, p := range phones {
		for _, form := range phoneForms(p) {
			if bytes.Contains(data, []byte(form)) {
				t.Errorf("%s holds the phone as %q", where, form)
			}
		}
		if national := strings.TrimPrefix(p, "+1"); bytes.Contains(digits, []byte(national)) {
			t.Errorf("%s holds the phone's digits %s (with separators)", where, national)
		}
	}
}

// TestNoPhoneAnywhere runs complete flows for several donors and every
// public event type (the enrollments' whole life, the re-consent flow, the
// sessions' declines and lockouts), then looks for their phone numbers, in
// every formatting, in everything the service wrote or answered: the
// JetStream store files, the bbolt file, the logs, every API response and
// event read back by id, every webhook and every page of the flow.
func TestNoPhoneAnywhere(t *testing.T) {
	t.Parallel()
	// The sweep itself finds a phone in each formatting.
	for _, form := range phoneForms("+12025550100") {
		var ce countErrors
		sweep(&ce, "probe", []byte("x "+form+" y"), []string{"+12025550100"})
		if ce.n == 0 {
			t.Fatalf("the sweep misses %q", form)
		}
	}

	clock := &testClock{}
	// The failing endpoint is disabled for failing after a second, so
	// webhook_endpoint.disabled is on the feed and the webhook too.
	ts := startStack(t, withClock(clock), withWebhooks(func(c *dispatcher.Config) {
		c.Schedule, c.DisableAfter = repeatWait(30, 200*time.Millisecond), time.Second
	}))
	rec := &recorder{next: http.DefaultTransport}
	c, _ := ts.partner(t, "https://partner.example")
	c.HTTP = &http.Client{Transport: rec}
	church := importChurch(t, c, "Grace Chapel")
	hooks := okReceiver(t)
	createEndpoint(t, c, hooks.URL)
	// A receiver that fails, and a forged vendor webhook, so the log has
	// the lines for what went wrong too.
	failing := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusInternalServerError })
	failingEp := createEndpoint(t, c, failing.URL)

	donors := []struct{ phone, mode, value, end string }{
		{"+12025550100", "pct", "3", "You're all set"},
		{"+12025550100", "fixed", "25.50", "You're all set"},
		{"+12025550101", "pct", "2.5", "We're reviewing your details"},
		{"+12025550102", "fixed", "10", "We couldn't verify your identity"},
		{"+12025550123", "pct", "1", "Checking your identity"},
	}
	var phones []string
	var enrollments []string
	sessionURLs := map[string]string{}
	for _, dn := range donors {
		phones = append(phones, dn.phone)
		s := openSession(t, c, church, dn.phone, dn.mode, dn.value, "https://partner.example/back")
		d := newDonorBrowser(t, s.URL, rec)
		d.open("")
		d.submit("code", nil)
		d.submit("verify", url.Values{"code": {"123456"}})
		d.submit("verify", url.Values{"code": {"000000"}})
		p := d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
		if dn.end == "Checking your identity" {
			p = d.verifyIdentity("wait")
		}
		if dn.end == "You're all set" {
			d.connectPayroll("user_bad")
			p = d.connectPayroll("user_good")
		}
		p.expect(t, http.StatusOK, dn.end)
		newDonorBrowser(t, s.URL, rec).open("").expect(t, http.StatusForbidden, "This link was already used")
		got := c.Do(http.MethodGet, "/v1/donor_sessions/"+s.ID, nil, nil)
		if id, _ := got.Map(t)["enrollment_id"].(string); id != "" {
			enrollments = append(enrollments, id)
			sessionURLs[id] = s.URL
		}
	}
	if len(enrollments) != 2 {
		t.Fatalf("%d enrollments, want 2", len(enrollments))
	}
	for _, id := range enrollments {
		c.Do(http.MethodGet, "/v1/enrollments/"+id, nil, nil)
	}
	c.Do(http.MethodGet, "/v1/enrollments", nil, nil)
	c.Do(http.MethodGet, "/v1/enrollments?church_id="+church, nil, nil)
	// Activations and a deposit, so every public event type is on the feed
	// and on the webhook.
	for _, id := range enrollments {
		c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", map[string]string{"enrollment_id": id, "church_id": church}, nil)
	}
	c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct","amount":10.10}`, nil)
	// The enrollments' whole life: pause, resume, a lower and a higher
	// value with the donor's re-consent, a raise left to expire, an end, a
	// cancel with the partner's reason; and a session locked by wrong codes.
	for _, step := range []struct{ action, body string }{{"pause", ""}, {"resume", ""}, {"update", `{"value":2}`}} {
		c.Do(http.MethodPost, "/v1/enrollments/"+enrollments[0]+"/"+step.action, step.body, nil)
	}
	var raised struct {
		ConsentURL string `json:"consent_url"`
	}
	c.Do(http.MethodPost, "/v1/enrollments/"+enrollments[0]+"/update", `{"value":4}`, nil).JSON(t, &raised)
	consentByFlow(t, raised.ConsentURL, rec)
	c.Do(http.MethodPost, "/v1/enrollments/"+enrollments[1]+"/update", `{"value":30}`, nil).JSON(t, &raised)
	newDonorBrowser(t, raised.ConsentURL, rec).open("").expect(t, http.StatusOK, "Confirm it's you")
	locked := openSession(t, c, church, "+12025550100", "pct", "1", "https://partner.example/back")
	d := newDonorBrowser(t, locked.URL, rec)
	d.open("")
	d.submit("code", nil)
	for range domain.MaxCodeAttempts {
		d.submit("verify", url.Values{"code": {"999999"}})
	}
	d.page.expect(t, http.StatusOK, "Too many wrong codes")
	clock.advance(domain.SessionLifetime + time.Second)
	waitFor(t, 10*time.Second, "the raise to expire", func() bool { return countEvents(t, ts, "enrollment.update_expired") == 1 })
	c.Do(http.MethodPost, "/sandbox/simulate/payroll-ended", map[string]string{"enrollment_id": enrollments[1], "church_id": church, "reason": "deposit_switch_reverted"}, nil)
	c.Do(http.MethodPost, "/v1/enrollments/"+enrollments[0]+"/cancel", `{"reason":"The donor asked to stop."}`, nil)
	for i, id := range enrollments {
		c.Do(http.MethodGet, "/v1/enrollments/"+id, nil, nil)
		want := []string{"Your giving was canceled", "Your giving has ended"}[i]
		newDonorBrowser(t, sessionURLs[id], rec).open("").expect(t, http.StatusOK, want)
	}
	c.Do(http.MethodGet, "/v1/event_types", nil, nil)
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+failingEp.ID+"/rotate_secret", `{"expire_current_in":60}`, nil)

	waitFor(t, 20*time.Second, "the failing endpoint disabled", func() bool {
		return countEvents(t, ts, "webhook_endpoint.disabled") == 1
	})
	var feed struct {
		Data []json.RawMessage `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/events?limit=1000", nil, nil).JSON(t, &feed)
	types := map[string]bool{}
	for _, item := range feed.Data {
		env := decodeEnvelope(t, item)
		types[env.EventType] = true
		c.Do(http.MethodGet, "/v1/events/"+env.EventID, nil, nil)
	}
	if len(types) != len(domain.PublicEventTypes()) {
		t.Fatalf("the feed holds %d event types, want every one of %v: %v", len(types), domain.PublicEventTypes(), types)
	}
	waitFor(t, 10*time.Second, "every event delivered", func() bool { return hooks.count() >= len(feed.Data) })
	for i, d := range hooks.deliveries() {
		sweep(t, fmt.Sprintf("webhook %d (%s)", i, d.EventType), d.Body, phones)
	}
	// Errors never echo the phone either.
	c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody("ch_x", "+12025550100", "pct", "0", "http://x"), nil)
	c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550100", "pct", "3", "https://partner.example/"), apitest.Header{"Idempotency-Key": "pii-1"})
	c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550101", "pct", "3", "https://partner.example/"), apitest.Header{"Idempotency-Key": "pii-1"})

	// A forged Stripe Identity event carrying a phone, signed with a secret
	// that is not the edge's: refused, and logged without its body.
	forged := []byte(`{"id":"evt_forged","object":"event","type":"identity.verification_session.verified","data":{"object":{"id":"vs_forged","object":"identity.verification_session","status":"verified","metadata":{"reference":"+12025550100"}}}}`)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/edge/kyc", bytes.NewReader(forged))
	req.Header.Set(stripeidentity.SignatureHeader, stripeidentity.Sign("whsec_forged", forged, time.Now()))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	waitFor(t, 10*time.Second, "the failing receiver tried", func() bool { return failing.count() > 0 })

	// /metrics, as Prometheus reads it.
	scraped := httptest.NewRecorder()
	ts.Metrics.Handler(false).ServeHTTP(scraped, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(scraped.Body.String(), `giving_http_requests_total{code="303",method="POST",route="/flow/{token}/payroll"}`) {
		t.Fatalf("the scrape misses the flow's requests:\n%s", scraped.Body)
	}
	sweep(t, "/metrics", scraped.Body.Bytes(), phones)

	responses := rec.all()
	if len(responses) < 40 {
		t.Fatalf("only %d responses captured", len(responses))
	}
	for i, body := range responses {
		sweep(t, fmt.Sprintf("response %d (%s)", i, strings.SplitN(body, "\n", 2)[0]), []byte(body), phones)
	}

	// Stop the stack so that every file is complete, then read them all.
	logs := ts.Logs.String()
	for _, line := range []string{`"route":"/flow/{token}/payroll"`, `"message":"webhook attempt failed; retry scheduled"`, `"message":"vendor webhook rejected"`} {
		if !strings.Contains(logs, line) {
			t.Fatalf("the logs do not have %s", line)
		}
	}
	ts.stop()
	sweep(t, "the logs", []byte(logs), phones)
	files := 0
	err := filepath.Walk(ts.Dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		sweep(t, strings.TrimPrefix(path, ts.Dir), data, phones)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stack.ProjectionsPath(ts.Config.Ledger)); err != nil || files < 5 {
		t.Fatalf("swept %d files; the bbolt file: %v", files, err)
	}
}
