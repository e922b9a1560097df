package e2e

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/stripeidentity"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
)

// The identity step: after consent the donor goes to the identity vendor's
// hosted page (Stripe Identity in production, the sandbox's built-in
// stand-in of it), comes back, and waits for the vendor's signed webhook at
// /edge/kyc to decide.

// standinPrefix is where the sandbox serves its identity stand-in's page.
const standinPrefix = "/standin/stripe/identity/"

// verifyIdentity takes the donor on the identity step's page to the
// identity vendor and, on the sandbox's stand-in page, makes choice
// (passed, review, failed or wait); it returns the page the donor is sent
// back to.
func (d *donorBrowser) verifyIdentity(choice string) flowPage {
	d.t.Helper()
	p := d.submit("identity", nil)
	if p.Status != http.StatusOK || !strings.Contains(p.URL, standinPrefix) {
		d.t.Fatalf("the identity step did not lead to the stand-in's page: %d at %s\n%s", p.Status, p.URL, p.Body)
	}
	return d.post(p.URL, url.Values{"choice": {choice}})
}

// post sends a form to any page, as a browser submits one.
func (d *donorBrowser) post(target string, form url.Values) flowPage {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return d.do(req)
}

// TestIdentityStandin walks the sandbox's identity step: each choice on
// the stand-in's page reaches the flow through the production edge, as
// Stripe's webhook; the page needs no API key and opens only the tokens
// the stand-in issued; a seed donor is still decided at once.
func TestIdentityStandin(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	for _, tc := range []struct{ choice, h1, status string }{
		{"passed", "Connect your payroll", "open"},
		{"review", "We're reviewing your details", "open"},
		{"failed", "We couldn't verify your identity", "declined"},
		{"wait", "Checking your identity", "open"},
	} {
		s := openSession(t, c, church, "+12025550123", "pct", "2", "https://partner.example/back")
		d := newDonorBrowser(t, s.URL, nil)
		verifiedDonor(t, d)
		d.page.expect(t, http.StatusOK, "Check your identity")
		checkFlowHeaders(t, d.page)
		if !strings.Contains(d.page.Body, `action="/flow/`) || !strings.Contains(d.page.Body, `/identity" novalidate>`) || !strings.Contains(d.page.Body, `id="sandbox-note"`) {
			t.Fatalf("the identity page has no form to the vendor: %s", d.page.Body)
		}
		d.verifyIdentity(tc.choice).expect(t, http.StatusOK, tc.h1)
		if !strings.HasPrefix(d.page.URL, s.URL) {
			t.Fatalf("%s: the donor came back to %s, not the flow", tc.choice, d.page.URL)
		}
		waitSessionStatus(t, c, s.ID, tc.status)
		// Back from the vendor, the page only reads: it shows the same.
		d.open("").expect(t, http.StatusOK, tc.h1)
	}

	// The wait is decided by the simulator, as before.
	s := openSession(t, c, church, "+12025550123", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	verifiedDonor(t, d)
	d.verifyIdentity("wait").expect(t, http.StatusOK, "Checking your identity")
	simulateKYC(t, c, church, s.DonorID, "passed")
	d.open("").expect(t, http.StatusOK, "Connect your payroll")

	// A token the stand-in did not issue, a choice it does not offer.
	p := newDonorBrowser(t, ts.URL+standinPrefix+"bm90LWEtdG9rZW4", nil).open("")
	if p.Status != http.StatusNotFound || strings.Contains(p.Body, "<form") {
		t.Fatalf("a forged stand-in page: %d\n%s", p.Status, p.Body)
	}
	s = openSession(t, c, church, "+12025550123", "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, s.URL, nil)
	verifiedDonor(t, d)
	page := d.submit("identity", nil)
	if page.Header.Get("Content-Security-Policy") == "" || strings.Contains(page.Header.Get("Content-Security-Policy"), "script-src") {
		t.Fatalf("the stand-in's page CSP: %q", page.Header.Get("Content-Security-Policy"))
	}
	if p := d.post(page.URL, url.Values{"choice": {"maybe"}}); p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an unknown choice: %d", p.Status)
	}
	if step := sessionStep(t, ts, pid, s.ID); step != domain.StepKYC {
		t.Fatalf("an unknown choice moved the session to %s", step)
	}

	// A seed donor never sees the identity step.
	seed := openSession(t, c, church, "+12025550101", "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, seed.URL, nil)
	verifiedDonor(t, d)
	d.page.expect(t, http.StatusOK, "We're reviewing your details")
}

// sessionStep is where a partner's session stands now.
func sessionStep(t *testing.T, ts *testStack, partner, id string) domain.FlowStep {
	t.Helper()
	ts.waitProjected(t)
	sess, ok, err := ts.Store.Session(partner, id)
	if err != nil || !ok {
		t.Fatalf("session %s: %v", id, err)
	}
	return sess.Step(time.Now())
}

// stripeEdge has a Stripe fake send its webhooks to a stack's /edge/kyc:
// the fake starts before the stack, whose address it learns afterwards.
type stripeEdge struct {
	target atomic.Pointer[url.URL]
	srv    *httptest.Server
}

func newStripeEdge(t *testing.T) *stripeEdge {
	e := &stripeEdge{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(e.target.Load())
			r.Out.Host = r.Out.URL.Host
		},
		// A webhook still on its way when the test ends finds the stack
		// gone: the fake records the 502.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	e.srv = httptest.NewServer(proxy)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *stripeEdge) pointAt(t *testing.T, base string) {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	e.target.Store(u)
}

const (
	stripeKey    = "sk_live_51ProductionIdentityTest"
	stripeSecret = "whsec_productionIdentityTest"
)

// withStripe has a production stack verify identities at fake, whose
// webhooks are signed with stripeSecret.
func withStripe(fake *stripefake.Server) stackOption {
	return func(c *stack.Config) {
		c.Stripe = stripeidentity.Config{SecretKey: stripeKey, BaseURL: fake.URL}
		c.Vendors.KYC = []byte(stripeSecret)
	}
}

// startStripe starts a Stripe fake for a production stack started after
// it: withStripe(fake) configures the stack, and edge.pointAt(t, ts.URL)
// then sends the fake's webhooks to the stack's /edge/kyc.
func startStripe(t *testing.T) (*stripefake.Server, *stripeEdge) {
	t.Helper()
	edge := newStripeEdge(t)
	fake := stripefake.Start(stripefake.Config{SecretKey: stripeKey, WebhookURL: edge.srv.URL + "/edge/kyc", WebhookSecret: stripeSecret})
	t.Cleanup(fake.Close)
	return fake, edge
}

// productionIdentity is a production stack whose identity vendor is a
// Stripe fake sending its webhooks to the stack's edge, and whose phone
// codes (424242) come from a Twilio fake.
func productionIdentity(t *testing.T, opts ...stackOption) (*testStack, *stripefake.Server) {
	t.Helper()
	fake, edge := startStripe(t)
	opts = append([]stackOption{withEnv(domain.Production), withSMS(startTwilio(t, "424242").verifier), withStripe(fake)}, opts...)
	ts := startStack(t, opts...)
	edge.pointAt(t, ts.URL)
	return ts, fake
}

// productionDonor takes a production donor through the phone step and
// consent, to the identity step.
func productionDonor(t *testing.T, d *donorBrowser) {
	t.Helper()
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"424242"}}).expect(t, http.StatusOK, "Agree to give")
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}).expect(t, http.StatusOK, "Check your identity")
}

// toStripe takes the donor on the identity step's page to the fake's
// hosted page, and returns that page.
func toStripe(t *testing.T, d *donorBrowser, fake *stripefake.Server) flowPage {
	t.Helper()
	p := d.submit("identity", nil)
	if p.Status != http.StatusOK || !strings.HasPrefix(p.URL, fake.URL+"/start/") {
		t.Fatalf("the identity step did not lead to Stripe's page: %d at %s\n%s", p.Status, p.URL, p.Body)
	}
	return p
}

// TestProductionIdentityThroughStripe runs the identity step of a
// production stack against a local Stripe written from Stripe's docs: the
// donor goes to Stripe's hosted page, verifies, comes back, and Stripe's
// signed webhooks move the session on; a donor who declines is declined; a
// donor who comes back without finishing starts again at a fresh page of
// the same verification; an expired session's verification is canceled.
// Stripe gets the donor's opaque ids, never the phone.
func TestProductionIdentityThroughStripe(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts, fake := productionIdentity(t, withClock(clock))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	phone := "+12025550100"

	// Production has no stand-in: its page is an ordinary 404.
	if p := newDonorBrowser(t, ts.URL+standinPrefix+"anything", nil).open(""); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "/problems/not-found") {
		t.Fatalf("the stand-in's page in production: %d %s", p.Status, p.Body)
	}

	// Passed: to Stripe and back, and on to payroll.
	s := openSession(t, c, church, phone, "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	productionDonor(t, d)
	csp := d.page.Header.Get("Content-Security-Policy")
	if want := strings.Replace(flowCSP, "form-action 'self'", "form-action 'self' "+fake.URL, 1); csp != want {
		t.Fatalf("the identity page's CSP %q, want %q", csp, want)
	}
	if strings.Contains(d.page.Body, "sandbox-note") {
		t.Fatalf("the production identity page shows the sandbox note: %s", d.page.Body)
	}
	// Stripe down: the donor is told to try again, and nothing is recorded.
	fake.FailNext(stripefake.Failure{Status: http.StatusInternalServerError, Type: "api_error", Message: "An unknown error occurred."})
	d.submit("identity", nil).expect(t, http.StatusOK, "Check your identity")
	if !strings.Contains(d.page.Body, "We could not reach the identity check.") || !strings.Contains(ts.Logs.String(), "identity verification could not be started") {
		t.Fatalf("Stripe down: the page does not say so, or the log does not: %s", d.page.Body)
	}
	page := toStripe(t, d, fake)
	d.post(page.URL, url.Values{"choice": {string(stripefake.Verify)}}).expect(t, http.StatusOK, "Connect your payroll")
	if !strings.HasPrefix(d.page.URL, s.URL) {
		t.Fatalf("Stripe sent the donor back to %s, not the flow", d.page.URL)
	}
	d.open("").expect(t, http.StatusOK, "Connect your payroll")

	creates := 0
	for _, r := range fake.Requests() {
		if r.Method != http.MethodPost || r.Path != "/v1/identity/verification_sessions" {
			continue
		}
		creates++
		if r.Refusal == "injected failure" {
			continue
		}
		want := url.Values{
			"type": {"document"}, "return_url": {s.URL},
			"metadata[reference]": {s.DonorID}, "metadata[church_id]": {church}, "metadata[donor_session_id]": {s.ID},
		}
		if r.Status != http.StatusOK || r.Form.Encode() != want.Encode() {
			t.Fatalf("create: %d %s, want %s", r.Status, r.Form.Encode(), want.Encode())
		}
		if r.Header.Get("Authorization") != "Bearer "+stripeKey || r.Header.Get("Idempotency-Key") != "identity-"+s.ID || r.Header.Get("Stripe-Version") != stripeidentity.APIVersion {
			t.Fatalf("create headers: %v", r.Header)
		}
	}
	if creates != 2 {
		t.Fatalf("%d creates, want the failed one and its retry", creates)
	}

	// Declined: the declined page, and the session is declined.
	s = openSession(t, c, church, phone, "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, s.URL, nil)
	productionDonor(t, d)
	page = toStripe(t, d, fake)
	d.post(page.URL, url.Values{"choice": {string(stripefake.Decline)}}).expect(t, http.StatusOK, "We couldn't verify your identity")
	waitSessionStatus(t, c, s.ID, "declined")

	// Back without finishing: Stripe says so when the donor comes back, and
	// the donor starts again at the page Stripe gives for the same
	// verification.
	s = openSession(t, c, church, phone, "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, s.URL, nil)
	productionDonor(t, d)
	page = toStripe(t, d, fake)
	d.post(page.URL, url.Values{"choice": {string(stripefake.Leave)}}).expect(t, http.StatusOK, "Finish checking your identity")
	again := toStripe(t, d, fake)
	if n := countRetrieves(fake); n < 2 {
		t.Fatalf("%d retrieves, want the return's and the restart's", n)
	}
	// A check that did not verify (a blurry photo): Stripe keeps the
	// verification open, and the donor tries again rather than waiting for
	// a review nobody makes; the retry passes.
	d.post(again.URL, url.Values{"choice": {string(stripefake.Unverified)}}).expect(t, http.StatusOK, "Finish checking your identity")
	retry := toStripe(t, d, fake)
	d.post(retry.URL, url.Values{"choice": {string(stripefake.Verify)}}).expect(t, http.StatusOK, "Connect your payroll")
	if n := countCreates(fake); n != 4 {
		t.Fatalf("%d creates for three donors and one failure", n)
	}

	// Left at Stripe until the session expired: its verification is
	// canceled, and Stripe's canceled event is acknowledged.
	s = openSession(t, c, church, phone, "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, s.URL, nil)
	productionDonor(t, d)
	toStripe(t, d, fake)
	clock.advance(domain.SessionLifetime + time.Second)
	waitSessionStatus(t, c, s.ID, "expired")
	waitFor(t, 10*time.Second, "the verification canceled", func() bool {
		for _, r := range fake.Requests() {
			if strings.HasSuffix(r.Path, "/cancel") && r.Status == http.StatusOK && r.Header.Get("Idempotency-Key") != "" {
				return true
			}
		}
		return false
	})

	// Every webhook was accepted or acknowledged; none carried the phone,
	// and no request to Stripe did.
	for _, dl := range fake.Deliveries() {
		if dl.Status/100 != 2 {
			t.Errorf("Stripe's %s webhook %s was answered %d %s", dl.Type, dl.EventID, dl.Status, dl.Err)
		}
	}
	digits := strings.TrimPrefix(phone, "+")
	for _, r := range fake.Requests() {
		if strings.Contains(r.Form.Encode()+r.Path, digits) {
			t.Errorf("a request to Stripe carries the phone: %s %s %s", r.Method, r.Path, r.Form.Encode())
		}
	}
	for _, e := range fake.Events() {
		if bytes.Contains(e.Body, []byte(digits)) {
			t.Errorf("Stripe's event %s carries the phone", e.ID)
		}
	}
}

func countRetrieves(fake *stripefake.Server) int {
	n := 0
	for _, r := range fake.Requests() {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/v1/identity/verification_sessions/vs_") {
			n++
		}
	}
	return n
}

func countCreates(fake *stripefake.Server) int {
	n := 0
	for _, r := range fake.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/identity/verification_sessions" {
			n++
		}
	}
	return n
}

// TestStripeIdentityFixtureAtTheEdge replays Stripe's documented event
// shape (the adapter's fixture, its reference pointed at a waiting donor)
// against a production edge: signed with the endpoint's secret it is
// accepted and moves the donor on; with another secret, or too old, it is
// refused with 400 and the log says why; an event the service does not act
// on is acknowledged.
func TestStripeIdentityFixtureAtTheEdge(t *testing.T) {
	t.Parallel()
	ts, _ := productionIdentity(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
	productionDonor(t, newDonorBrowser(t, s.URL, nil))

	fixture := func(name string) []byte {
		raw, err := os.ReadFile("../vendors/stripeidentity/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Replace(raw, []byte(`"reference": "ds_2hQ8fixtureDonorSession"`),
			[]byte(`"reference": "`+s.DonorID+`", "church_id": "`+church+`"`), 1)
	}
	post := func(body []byte, secret string, at time.Time) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/edge/kyc", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set(stripeidentity.SignatureHeader, stripeidentity.Sign(secret, body, at))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	verified := fixture("event_verified.json")
	for _, tc := range []struct {
		name   string
		secret string
		at     time.Time
		reason string
	}{
		{"another secret", "whsec_notTheEndpoints", time.Now(), "no valid v1 signature"},
		{"too old", stripeSecret, time.Now().Add(-10 * time.Minute), "timestamp outside the tolerance"},
	} {
		status, body := post(verified, tc.secret, tc.at)
		if status != http.StatusBadRequest || !strings.Contains(body, "/problems/invalid-signature") {
			t.Fatalf("%s: %d %s, want 400 invalid-signature", tc.name, status, body)
		}
		if !strings.Contains(ts.Logs.String(), tc.reason) {
			t.Fatalf("%s: the log does not say %q", tc.name, tc.reason)
		}
	}
	if step := sessionStep(t, ts, pid, s.ID); step != domain.StepKYC {
		t.Fatalf("a refused webhook moved the session to %s", step)
	}
	if status, body := post(fixture("event_processing.json"), stripeSecret, time.Now()); status != http.StatusOK || !strings.Contains(body, `"ignored"`) {
		t.Fatalf("processing: %d %s, want it acknowledged", status, body)
	}
	if status, body := post(verified, stripeSecret, time.Now()); status != http.StatusOK || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("verified: %d %s", status, body)
	}
	if status, body := post(verified, stripeSecret, time.Now()); status != http.StatusOK || !strings.Contains(body, `"duplicate"`) {
		t.Fatalf("verified again: %d %s", status, body)
	}
	if sess, _, _ := ts.Store.Session(pid, s.ID); sess.Step(time.Now()) != domain.StepPayroll || sess.KYC != domain.KYCPassed {
		t.Fatalf("after verified: %s %q", sess.Step(time.Now()), sess.KYC)
	}
	if status, body := post([]byte(`{"id":"evt_1","object":"event"}`), stripeSecret, time.Now()); status != http.StatusBadRequest || !strings.Contains(body, "/problems/malformed-json") {
		t.Fatalf("a signed body that is no event: %d %s", status, body)
	}
}

// TestProductionIdentityInBrowser: in Chromium, the production identity
// step's form leads to Stripe's hosted page (the fake's) under the page's
// CSP, which allows that origin alone besides the service; Stripe sends the
// donor back and the flow goes on to payroll, with no CSP violation.
func TestProductionIdentityInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	ts, fake := productionIdentity(t)
	c, pid := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/done")
	tb := b.tab(t)
	tb.open(s.URL, "Confirm it's you")
	tb.verifyPhoneWith("424242")
	tb.consent("Check your identity")
	tb.click("#identity", "Verify your identity")
	if at := tb.text(`location.origin`); at != fake.URL {
		t.Fatalf("the identity form led to %s, not Stripe's page at %s", at, fake.URL)
	}
	tb.click(`button[value="verify"]`, "Connect your payroll")
	if at := tb.text(`location.href`); at != s.URL {
		t.Fatalf("Stripe sent the donor back to %s", at)
	}
	for _, m := range tb.messages() {
		if strings.Contains(m, "Content Security Policy") {
			t.Fatalf("a CSP violation: %s", m)
		}
	}
	waitFor(t, 10*time.Second, "the session to pass identity", func() bool {
		return sessionStep(t, ts, pid, s.ID) == domain.StepPayroll
	})
}

// TestIdentityStandinOnAnotherInstance: the stand-in keeps no state, so a
// page one instance issued opens, and decides, on another instance sharing
// the ledger and the master key.
func TestIdentityStandinOnAnotherInstance(t *testing.T) {
	t.Parallel()
	a := startStack(t, withNATSListen("127.0.0.1:0"))
	key, err := os.ReadFile(filepath.Join(a.Dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := startStack(t, withNATSURL(a.Ledger.ClientURL()), withMasterKey(strings.TrimSpace(string(key))))
	c, _ := a.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550123", "pct", "3", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	verifiedDonor(t, d)
	page := d.submit("identity", nil)
	if !strings.HasPrefix(page.URL, a.URL+standinPrefix) {
		t.Fatalf("instance a sent the donor to %s", page.URL)
	}
	onB := b.URL + strings.TrimPrefix(page.URL, a.URL)
	req, _ := http.NewRequest(http.MethodGet, onB, nil)
	d.do(req).expect(t, http.StatusOK, "Verify your identity")
	d.post(onB, url.Values{"choice": {"passed"}})
	waitFor(t, 10*time.Second, "the flow to go on to payroll", func() bool {
		return d.open("").h1() == "Connect your payroll"
	})
}
