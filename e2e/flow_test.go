package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
)

const flowCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// checkFlowHeaders fails unless a flow answer carries the security headers.
func checkFlowHeaders(t *testing.T, p flowPage) {
	t.Helper()
	want := map[string]string{
		"Content-Security-Policy": flowCSP,
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
		"Content-Type":            "text/html; charset=utf-8",
		"X-Content-Type-Options":  "nosniff",
	}
	for k, v := range want {
		if got := p.Header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", p.URL, k, got, v)
		}
	}
}

// TestFlowWithoutJavaScript walks the whole hosted flow as a browser without
// JavaScript would (forms posted, redirects followed, cookies kept), and
// checks refresh, back-and-resubmit, CSRF and the binding to one browser.
func TestFlowWithoutJavaScript(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/giving/done?ref=a%2Fb&x=1#top")
	token := strings.TrimPrefix(s.URL, ts.URL+"/flow/")
	d := newDonorBrowser(t, s.URL, nil)

	// Phone verification: the page names only the last two digits.
	p := d.open("")
	p.expect(t, http.StatusOK, "Confirm it's you")
	checkFlowHeaders(t, p)
	if !strings.Contains(p.Body, "ending in <strong>00</strong>") || strings.Contains(p.Body, "555") {
		t.Fatalf("masked phone: %s", p.Body)
	}
	cookie := p.Header.Get("Set-Cookie")
	for _, attr := range []string{"giving_flow=", "Path=/flow/" + token, "HttpOnly", "SameSite=Lax", "Max-Age="} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("binding cookie %q lacks %s", cookie, attr)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("cookie is Secure on an http public url: %q", cookie)
	}
	if !strings.Contains(p.Body, `<html lang="en">`) || !strings.Contains(p.Body, `aria-current="step"`) {
		t.Errorf("page lacks lang or the progress marker")
	}

	// A code cannot be checked before one was sent.
	p = d.submit("verify", url.Values{"code": {"000000"}})
	p.expect(t, http.StatusOK, "Confirm it's you")
	if !strings.Contains(p.Body, "Send a code to your phone first.") || !strings.Contains(p.URL, "?e=no-code") {
		t.Fatalf("no-code: %s", p.Body)
	}
	p = d.submit("code", nil)
	if !strings.Contains(p.Body, `<label for="code">`) {
		t.Fatalf("after sending, the code field is shown: %s", p.Body)
	}
	// A resend waits 30 s.
	p = d.submit("code", nil)
	if !strings.Contains(p.Body, `id="send-error"`) || !strings.Contains(p.Body, "before asking for another code") {
		t.Fatalf("resend too soon: %s", p.Body)
	}
	// A malformed code is an error tied to the field and costs no try.
	p = d.submit("verify", url.Values{"code": {"12ab"}})
	if !strings.Contains(p.Body, `aria-describedby="code-hint code-error" aria-invalid="true"`) || !strings.Contains(p.Body, `id="code-error"`) {
		t.Fatalf("format error not tied to the field: %s", p.Body)
	}
	p = d.submit("verify", url.Values{"code": {"123456"}})
	if !strings.Contains(p.Body, "That code is not right. You have 4 tries left.") || !strings.Contains(p.Body, "<title>Error: ") {
		t.Fatalf("wrong code: %s", p.Body)
	}
	p = d.submit("verify", url.Values{"code": {"000 000"}})
	p.expect(t, http.StatusOK, "Agree to give")
	if !strings.Contains(p.Body, "3% of each paycheck") || !strings.Contains(p.Body, "Grace Chapel") || !strings.Contains(p.Body, domain.ConsentVersion) {
		t.Fatalf("consent page must name the church, the amount in words and the version: %s", p.Body)
	}

	// Refresh shows the same step; back-and-resubmit of a passed step
	// changes nothing and lands on the current step.
	d.open("").expect(t, http.StatusOK, "Agree to give")
	d.submit("verify", url.Values{"code": {"000000"}}).expect(t, http.StatusOK, "Agree to give")
	if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.phone_verified"); n != 1 {
		t.Fatalf("%d phone_verified events, want 1", n)
	}
	// A GET on an action address goes back to the page.
	d.open("/verify").expect(t, http.StatusOK, "Agree to give")

	// CSRF: a form without the right token changes nothing.
	form := url.Values{"csrf": {"forged"}, "version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}
	d.submit("consent", form).expect(t, http.StatusForbidden, "Please try that again")
	form.Del("csrf")
	d.open("")
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/consent", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	d.do(req).expect(t, http.StatusForbidden, "Please try that again")
	if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.consented"); n != 0 {
		t.Fatalf("a forged form consented")
	}
	d.open("")

	// Consent needs both boxes.
	p = d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}})
	if !strings.Contains(p.Body, `id="consent-error"`) || !strings.Contains(p.Body, "Tick both boxes") {
		t.Fatalf("consent error: %s", p.Body)
	}
	// The seed donor passes identity verification at once.
	p = d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
	p.expect(t, http.StatusOK, "Connect your payroll")
	var consent *domain.ConsentGiven
	for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.consented") {
		if ev.AggregateID == s.ID {
			consent = ev.Payload.(*domain.ConsentGiven)
		}
	}
	if consent == nil || consent.Version != domain.ConsentVersion || !strings.Contains(consent.Text, "3% of each paycheck") {
		t.Fatalf("consent event: %+v", consent)
	}

	// The payroll page asks for no credentials: the donor signs in inside
	// the payroll vendor's widget, which the connection page alone loads.
	if strings.Contains(p.Body, `name="password"`) || strings.Contains(p.Body, `name="username"`) || strings.Contains(p.Body, "<script") {
		t.Fatalf("the payroll page asks for credentials or runs a script:\n%s", p.Body)
	}
	// A refused connection shows an error screen to retry from.
	p = d.connectPayroll("user_bad")
	p.expect(t, http.StatusOK, "We couldn't connect your payroll")
	if !strings.Contains(p.Body, "did not accept the connection") || !strings.Contains(p.Body, "Try again") {
		t.Fatalf("failure screen: %s", p.Body)
	}
	payrollCSRF := p.csrf()
	p = d.connectPayroll("user_good")
	p.expect(t, http.StatusOK, "You're all set")
	wantReturn := "https://partner.example/giving/done?ref=a%2Fb&amp;x=1&amp;session_id=" + s.ID + "&amp;status=completed#top"
	if !strings.Contains(p.Body, `href="`+wantReturn+`"`) {
		t.Fatalf("return link, want %s in\n%s", wantReturn, p.Body)
	}
	// Submitting payroll again (back, resubmit) creates nothing more.
	d.submit("payroll", url.Values{"csrf": {payrollCSRF}}).expect(t, http.StatusOK, "You're all set")

	var created []domain.Event
	for _, ev := range ledgerEvents(t, ts.Ledger, "enrollment.created") {
		if ev.Payload.(*domain.EnrollmentCreated).DonorSessionID == s.ID {
			created = append(created, ev)
		}
	}
	if len(created) != 1 {
		t.Fatalf("%d enrollment.created events, want 1", len(created))
	}
	env, _ := created[0].Envelope()
	var envelope struct {
		ChurchID string         `json:"church_id"`
		Payload  map[string]any `json:"payload"`
	}
	_ = json.Unmarshal(env, &envelope)
	en := created[0].Payload.(*domain.EnrollmentCreated)
	if envelope.ChurchID != church || len(envelope.Payload) != 5 || envelope.Payload["status"] != "pending" || envelope.Payload["mode"] != "pct" || envelope.Payload["value"] != 3.0 || envelope.Payload["donor_session_id"] != s.ID || envelope.Payload["enrollment_id"] != en.EnrollmentID {
		t.Fatalf("enrollment.created envelope: %s", env)
	}
	got := waitSessionStatus(t, c, s.ID, "completed")
	if got.EnrollmentID == nil || *got.EnrollmentID != en.EnrollmentID {
		t.Fatalf("session: %+v", got)
	}
	if r := c.Do(http.MethodGet, "/v1/enrollments/"+en.EnrollmentID, nil, nil); r.Status != http.StatusOK || r.Map(t)["status"] != "pending" {
		t.Fatalf("enrollment: %d %s", r.Status, r.Body)
	}

	// Another browser gets "link already used", for pages and forms alike.
	other := newDonorBrowser(t, s.URL, nil)
	p = other.open("")
	p.expect(t, http.StatusForbidden, "This link was already used")
	checkFlowHeaders(t, p)
	other.submit("payroll", url.Values{"csrf": {d.page.csrf()}}).expect(t, http.StatusForbidden, "This link was already used")

	// Unknown and malformed addresses get the HTML not-found page.
	for _, path := range []string{"/flow/" + strings.Repeat("A", 43), "/flow/short", "/flow/" + token + "/nope", "/flow/"} {
		p := newDonorBrowser(t, ts.URL+path, nil).open("")
		p.expect(t, http.StatusNotFound, "We can't find this page")
		checkFlowHeaders(t, p)
	}
	// The stylesheet is served from here.
	if r, err := http.Get(ts.URL + "/assets/flow.css"); err != nil || r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("stylesheet: %v %v", r, err)
	}

	// The access log names the route, never the token.
	logs := ts.Logs.String()
	if strings.Contains(logs, token) || !strings.Contains(logs, `"route":"/flow/{token}"`) || !strings.Contains(logs, `"route":"/flow/{token}/payroll"`) {
		t.Fatalf("access log: token leaked or routes missing")
	}
}
