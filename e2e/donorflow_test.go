package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// ---- The hosted flow, in a browser without JavaScript ----

// openSession creates a donor session and returns it with its url.
func openSession(t *testing.T, c *apitest.Client, church, phone, mode, value, redirect string) sessionResponse {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, phone, mode, value, redirect), nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create session: %d %s", resp.Status, resp.Body)
	}
	var s sessionResponse
	resp.JSON(t, &s)
	return s
}

// waitSessionStatus polls the API until the session has status.
func waitSessionStatus(t *testing.T, c *apitest.Client, id, status string) sessionResponse {
	t.Helper()
	var s sessionResponse
	waitFor(t, 10*time.Second, "session "+id+" to become "+status, func() bool {
		c.Do(http.MethodGet, "/v1/donor_sessions/"+id, nil, nil).JSON(t, &s)
		return s.Status == status
	})
	return s
}

// donorBrowser is a browser without JavaScript: an HTTP client with a cookie
// jar that follows redirects, posting forms as a browser would.
type donorBrowser struct {
	t    *testing.T
	hc   *http.Client
	url  string
	page flowPage
}

// flowPage is one page the donor saw.
type flowPage struct {
	Status int
	URL    string
	Header http.Header
	Body   string
}

func newDonorBrowser(t *testing.T, flowURL string, rt http.RoundTripper) *donorBrowser {
	jar, _ := cookiejar.New(nil)
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &donorBrowser{t: t, hc: &http.Client{Jar: jar, Transport: rt, Timeout: 30 * time.Second}, url: flowURL}
}

func (d *donorBrowser) do(req *http.Request) flowPage {
	d.t.Helper()
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	d.page = flowPage{Status: resp.StatusCode, URL: resp.Request.URL.String(), Header: resp.Header, Body: string(body)}
	return d.page
}

// open loads the flow's url (or path under it).
func (d *donorBrowser) open(suffix string) flowPage {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.url+suffix, nil)
	return d.do(req)
}

// submit posts a form of the current page to the flow action, with the
// page's CSRF token unless form sets one.
func (d *donorBrowser) submit(action string, form url.Values) flowPage {
	d.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["csrf"]; !set {
		form.Set("csrf", d.page.csrf())
	}
	req, _ := http.NewRequest(http.MethodPost, d.url+"/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return d.do(req)
}

// connectPayroll opens the payroll connection and signs in to the
// sandbox's stand-in of the payroll vendor's widget as user (user_good,
// user_bad), as the widget's window does in a browser, then comes back to
// the flow's page. The widget's token travels in the connection page's
// fragment, as the flow hands it over.
func (d *donorBrowser) connectPayroll(user string) flowPage {
	d.t.Helper()
	p := d.submit("payroll", nil)
	p.expect(d.t, http.StatusOK, "Connect your payroll")
	if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "unsafe") || strings.Contains(csp, "*") {
		d.t.Fatalf("the connection page's policy: %s", csp)
	}
	at, _ := url.Parse(p.URL)
	frag, _ := url.ParseQuery(at.EscapedFragment())
	script := widgetScript.FindStringSubmatch(p.Body)
	if frag.Get("bridge") == "" || script == nil {
		d.t.Fatalf("the connection page carries no widget token or script: %s\n%s", p.URL, p.Body)
	}
	widget := strings.TrimSuffix(html.UnescapeString(script[1]), "/bridge.js") + "/bridge/" + url.PathEscape(frag.Get("bridge"))
	req, _ := http.NewRequest(http.MethodPost, widget, strings.NewReader(url.Values{"username": {user}, "password": {"any"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if w := d.do(req); w.Status != http.StatusOK || !strings.Contains(w.Body, "Connect your payroll") {
		d.t.Fatalf("the payroll widget: %d\n%s", w.Status, w.Body)
	}
	return d.open("")
}

var (
	widgetScript = regexp.MustCompile(`<script src="([^"]+/bridge\.js)"></script>`)
	csrfField    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	h1Element    = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
)

func (p flowPage) csrf() string {
	m := csrfField.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

func (p flowPage) h1() string {
	m := h1Element.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// expect fails unless the page has the status and heading.
func (p flowPage) expect(t *testing.T, status int, h1 string) {
	t.Helper()
	if p.Status != status || p.h1() != h1 {
		t.Fatalf("want %d %q, got %d %q at %s\n%s", status, h1, p.Status, p.h1(), p.URL, p.Body)
	}
}

// enrollByFlow opens a donor session and completes the hosted flow in a
// browser without JavaScript with a seed donor who passes identity
// verification, and returns the session, the enrollment it made and the
// donor's browser (bound to the session).
func enrollByFlow(t *testing.T, c *apitest.Client, church, mode, value string, rt http.RoundTripper) (sessionResponse, string, *donorBrowser) {
	t.Helper()
	s := openSession(t, c, church, "+12025550100", mode, value, "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, rt)
	d.open("")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"000000"}})
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
	d.connectPayroll("user_good").expect(t, http.StatusOK, "You're all set")
	done := waitSessionStatus(t, c, s.ID, "completed")
	return s, *done.EnrollmentID, d
}

// consentByFlow agrees, in a browser without JavaScript, to the higher
// value a consent url asks for, and returns the browser.
func consentByFlow(t *testing.T, consentURL string, rt http.RoundTripper) *donorBrowser {
	t.Helper()
	d := newDonorBrowser(t, consentURL, rt)
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"000000"}}).expect(t, http.StatusOK, "Agree to give")
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}).expect(t, http.StatusOK, "Your new amount is set")
	return d
}

// eventWatch follows one partner's events as an integration does: on a
// webhook receiver, on the feed and by id.
type eventWatch struct {
	ts      *testStack
	c       *apitest.Client
	hooks   *receiver
	partner string
	seen    map[string]bool
}

func watchEvents(t *testing.T, ts *testStack, c *apitest.Client, partner string) *eventWatch {
	t.Helper()
	hooks := okReceiver(t)
	createEndpoint(t, c, hooks.URL)
	return &eventWatch{ts: ts, c: c, hooks: hooks, partner: partner, seen: map[string]bool{}}
}

// expect waits for the next event of typ about subject (the payload's
// enrollment_id or donor_session_id) on the webhook receiver, checks that
// the feed item and GET /v1/events/{event_id} are the webhook's body byte
// for byte, and returns the payload.
func (w *eventWatch) expect(t *testing.T, typ, subject string) map[string]any {
	t.Helper()
	var got delivery
	var payload map[string]any
	waitFor(t, 15*time.Second, typ+" about "+subject+" on the webhook", func() bool {
		for _, d := range w.hooks.deliveries() {
			var env struct {
				Payload map[string]any `json:"payload"`
			}
			_ = json.Unmarshal(d.Body, &env)
			if d.EventType == typ && !w.seen[d.EventID] && (env.Payload["enrollment_id"] == subject || env.Payload["donor_session_id"] == subject) {
				got, payload = d, env.Payload
				return true
			}
		}
		return false
	})
	w.seen[got.EventID] = true
	feed := w.c.Do(http.MethodGet, "/v1/events?limit=1000&type="+typ, nil, nil)
	var page eventPage
	feed.JSON(t, &page)
	found := false
	for _, item := range page.Data {
		if decodeEnvelope(t, item).EventID == got.EventID {
			found = true
			if !bytes.Equal(item, got.Body) {
				t.Fatalf("%s: feed item\n%s\nwebhook body\n%s", typ, item, got.Body)
			}
		}
	}
	if !found {
		t.Fatalf("%s %s is not on the feed", typ, got.EventID)
	}
	one := w.c.Do(http.MethodGet, "/v1/events/"+got.EventID, nil, nil)
	if one.Status != http.StatusOK || !bytes.Equal(one.Body, got.Body) {
		t.Fatalf("GET /v1/events/%s: %d\n%s\nwant\n%s", got.EventID, one.Status, one.Body, got.Body)
	}
	return payload
}

// appended counts the ledger's events about one aggregate of the partner,
// internal ones included: a repeated move must not add any.
func (w *eventWatch) appended(t *testing.T, aggregate string) int {
	t.Helper()
	recs, _, err := w.ts.Ledger.Read(context.Background(), w.ts.Ledger.Subjects().Aggregate(w.partner, aggregate), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// recorder keeps every response body a client received, for the PII sweep.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	next   http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, req.Method+" "+req.URL.Path+" → "+resp.Status+"\n"+headerText(resp.Header)+"\n"+string(body))
	r.mu.Unlock()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp, nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func headerText(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	return b.String()
}

// donorPhone reads the phone of a session's donor from the vault, as the
// hosted flow does.
func donorPhone(t *testing.T, ts *testStack, partner, sessionID string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Projector.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	sess, ok, err := ts.Store.Session(partner, sessionID)
	if err != nil || !ok {
		t.Fatalf("session %s: %v, %v", sessionID, ok, err)
	}
	vault, err := vault.Open(ctx, ts.Ledger, ts.Secrets, vault.PhoneKeyTimes{})
	if err != nil {
		t.Fatal(err)
	}
	return vault.Phone(ctx, sess.DonorID, sess.Phone)
}
