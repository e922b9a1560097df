package e2e

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
)

// The dashboard's protections, over plain HTTP: single-use, expiring links;
// sessions that end with their key; forms refused from another site or
// without the session's token; a double submit acting once; another
// partner's ids answered 404 by every page and action; no phone number on
// any page; the policy headers.

// dashClient is a browser without a browser: a cookie jar, and forms read
// from the pages it gets.
type dashClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newDashClient(t *testing.T, base string) *dashClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &dashClient{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// do sends a request (a form when form is not nil) and returns the final
// answer, redirects followed.
func (d *dashClient) do(method, target string, form url.Values, header map[string]string) (*http.Response, string) {
	d.t.Helper()
	if !strings.HasPrefix(target, "http") {
		target = d.base + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		d.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (d *dashClient) get(path string) (int, string) {
	d.t.Helper()
	resp, body := d.do(http.MethodGet, path, nil, nil)
	return resp.StatusCode, body
}

func (d *dashClient) post(path string, form url.Values) (int, string) {
	d.t.Helper()
	resp, body := d.do(http.MethodPost, path, form, nil)
	return resp.StatusCode, body
}

// keyField is the Idempotency-Key a dashboard form was rendered with.
// upload posts form with a CSV file as its file field.
func (d *dashClient) upload(path string, form url.Values, csv string) (int, string) {
	d.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range form {
		for _, v := range vs {
			_ = mw.WriteField(k, v)
		}
	}
	fw, err := mw.CreateFormFile("file", "churches.csv")
	if err != nil {
		d.t.Fatal(err)
	}
	_, _ = io.WriteString(fw, csv)
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, d.base+path, &body)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var keyField = regexp.MustCompile(`name="idempotency_key" value="([^"]+)"`)

// form is a fresh form of the session, as the overview renders it.
func (d *dashClient) form() url.Values {
	d.t.Helper()
	status, page := d.get("/dashboard/")
	c, k := csrfField.FindStringSubmatch(page), keyField.FindStringSubmatch(page)
	if status != http.StatusOK || c == nil || k == nil {
		d.t.Fatalf("no form on the overview: %d %s", status, page)
	}
	return url.Values{"csrf": {c[1]}, "idempotency_key": {k[1]}}
}

// signIn opens a fresh link of c's key in d.
func (d *dashClient) signIn(c *apitest.Client) {
	d.t.Helper()
	if status, page := d.post(dashboardLink(d.t, c), url.Values{}); status != http.StatusOK || heading(page) != "Overview" {
		d.t.Fatalf("sign in: %d %s", status, heading(page))
	}
}

func heading(page string) string { return flowPage{Body: page}.h1() }

func TestDashboardLinksAndSessions(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, pid := ts.partner(t)

	// A link works once.
	link := dashboardLink(t, c)
	d := newDashClient(t, ts.URL)
	if status, page := d.get(link); status != http.StatusOK || heading(page) != "Open the dashboard" {
		t.Fatalf("the link's page: %d %s", status, heading(page))
	}
	resp, page := d.do(http.MethodPost, link, url.Values{}, nil)
	if resp.StatusCode != http.StatusOK || heading(page) != "Overview" {
		t.Fatalf("open the link: %d %s", resp.StatusCode, heading(page))
	}
	if status, page := newDashClient(t, ts.URL).post(link, url.Values{}); status != http.StatusForbidden || heading(page) != "This link was already used" {
		t.Fatalf("a reused link: %d %s", status, heading(page))
	}

	// An expired link, and one posted from another site, open nothing.
	late := dashboardLink(t, c)
	clock.advance(11 * time.Minute)
	if status, page := newDashClient(t, ts.URL).post(late, url.Values{}); status != http.StatusGone || heading(page) != "This link has expired" {
		t.Fatalf("an expired link: %d %s", status, heading(page))
	}
	other := newDashClient(t, ts.URL)
	if r, _ := other.do(http.MethodPost, dashboardLink(t, c), url.Values{}, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a link posted from another site: %d", r.StatusCode)
	}

	// The session lasts 8 hours.
	if status, _ := d.get("/dashboard/endpoints"); status != http.StatusOK {
		t.Fatalf("a session after 11 minutes: %d", status)
	}
	clock.advance(8 * time.Hour)
	if status, page := d.get("/dashboard/endpoints"); status != http.StatusUnauthorized || heading(page) != "Sign in to the dashboard" {
		t.Fatalf("a session after 8 hours: %d %s", status, heading(page))
	}

	// Revoking the key that asked for the link ends the session: by the
	// operator, and by the partner with another key.
	second, err := ts.Operators.IssueKey(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	c2 := &apitest.Client{TB: t, Base: ts.URL, Key: second.Secret}
	d = newDashClient(t, ts.URL)
	d.signIn(c)
	d2 := newDashClient(t, ts.URL)
	d2.signIn(c2)
	if resp := c2.Do(http.MethodDelete, "/v1/api_keys/"+c.Key[:len("sk_test_")+8], nil, nil); resp.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", resp.Status, resp.Body)
	}
	if status, _ := d.get("/dashboard/"); status != http.StatusUnauthorized {
		t.Fatalf("a session of a revoked key: %d", status)
	}
	if status, _ := d2.get("/dashboard/"); status != http.StatusOK {
		t.Fatalf("the other key's session: %d", status)
	}
	if _, err := ts.Operators.RevokeKey(context.Background(), second.Prefix); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	if status, _ := d2.get("/dashboard/"); status != http.StatusUnauthorized {
		t.Fatalf("a session of a key the operator revoked: %d", status)
	}

	// A roll that expires the key at once ends its sessions too.
	rolling, err := ts.Operators.IssueKey(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	cr := &apitest.Client{TB: t, Base: ts.URL, Key: rolling.Secret}
	dr := newDashClient(t, ts.URL)
	dr.signIn(cr)
	if resp := cr.Do(http.MethodPost, "/v1/api_keys/roll", map[string]any{"expire_current_in": 0}, nil); resp.Status != http.StatusCreated {
		t.Fatalf("roll: %d %s", resp.Status, resp.Body)
	}
	clock.advance(time.Second)
	if status, _ := dr.get("/dashboard/"); status != http.StatusUnauthorized {
		t.Fatalf("a session of a rolled-out key: %d", status)
	}

	// Signing out ends the session; the cookie is not enough.
	third, err := ts.Operators.IssueKey(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	d3 := newDashClient(t, ts.URL)
	d3.signIn(&apitest.Client{TB: t, Base: ts.URL, Key: third.Secret})
	cookies := d3.hc.Jar.Cookies(mustURL(t, ts.URL+"/dashboard/"))
	if status, page := d3.post("/dashboard/logout", d3.form()); status != http.StatusOK || heading(page) != "Signed out" {
		t.Fatalf("sign out: %d %s", status, heading(page))
	}
	replayed := newDashClient(t, ts.URL)
	replayed.hc.Jar.SetCookies(mustURL(t, ts.URL+"/dashboard/"), cookies)
	if status, _ := replayed.get("/dashboard/"); status != http.StatusUnauthorized {
		t.Fatalf("a signed-out session's cookie: %d", status)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestDashboardFormsAndIsolation(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rc := okReceiver(t)
	church := importChurch(t, c, "Grace Chapel")
	_, mine, _ := enrollByFlow(t, c, church, "pct", "3", nil)
	d := newDashClient(t, ts.URL)
	d.signIn(c)

	// A double submit of one rendered form acts once.
	form := d.form()
	form.Set("url", rc.URL)
	form.Set("event_types", "*")
	_, first := d.post("/dashboard/endpoints", form)
	_, second := d.post("/dashboard/endpoints", form)
	id := regexp.MustCompile(`/dashboard/endpoints/(we_\w+)`)
	if heading(first) != "Endpoint created" || id.FindStringSubmatch(first)[1] != id.FindStringSubmatch(second)[1] {
		t.Fatalf("a double submit: %s, then %s", heading(first), heading(second))
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/webhook_endpoints", nil, nil).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("%d endpoints after a double submit", len(list.Data))
	}
	mineEndpoint := id.FindStringSubmatch(first)[1]

	// An Ed25519 endpoint: its public key is shown beside the secret.
	form = d.form()
	form.Set("url", rc.URL)
	form.Set("event_types", "enrollment.canceled")
	form.Set("signature_scheme", "ed25519")
	if _, page := d.post("/dashboard/endpoints", form); heading(page) != "Endpoint created" || !strings.Contains(page, "whpk_") {
		t.Fatalf("an ed25519 endpoint: %s", heading(page))
	}

	// A CSV import of more than 1000 rows is refused by the import's own
	// rule, its problem shown in the page.
	rows := "name\n" + strings.Repeat("A church\n", 1001)
	if status, page := d.upload("/dashboard/churches/import", d.form(), rows); status != http.StatusRequestEntityTooLarge || heading(page) != "Batch too large" || !strings.Contains(page, "at most 1000") {
		t.Fatalf("a 1001-row file: %d %s", status, heading(page))
	}
	if status, page := d.upload("/dashboard/churches/import", d.form(), "name,external_id\n\"unclosed,x\n"); status != http.StatusUnprocessableEntity || !strings.Contains(page, "not valid CSV") {
		t.Fatalf("a broken file: %d %s", status, heading(page))
	}

	// A form from another site, or without the session's token, is
	// refused, and does nothing.
	disable := "/dashboard/endpoints/" + mineEndpoint + "/disable"
	for name, try := range map[string]func() int{
		"cross-site": func() int {
			r, _ := d.do(http.MethodPost, disable, d.form(), map[string]string{"Sec-Fetch-Site": "cross-site"})
			return r.StatusCode
		},
		"another origin": func() int {
			r, _ := d.do(http.MethodPost, disable, d.form(), map[string]string{"Origin": "https://evil.example"})
			return r.StatusCode
		},
		"no token": func() int {
			f := d.form()
			f.Del("csrf")
			status, _ := d.post(disable, f)
			return status
		},
	} {
		if status := try(); status != http.StatusForbidden {
			t.Errorf("%s: %d", name, status)
		}
	}
	if state, _ := endpointState(t, c, mineEndpoint); state != "enabled" {
		t.Fatalf("a refused form disabled the endpoint: %s", state)
	}

	// Another partner's endpoint, attempt, recovery, event and enrollment:
	// every page and every action answers 404 and changes nothing.
	o, _ := ts.partner(t)
	oChurch := importChurch(t, o, "Other Church")
	_, theirs, _ := enrollByFlow(t, o, oChurch, "pct", "3", nil)
	oep := createEndpoint(t, o, rc.URL)
	o.Do(http.MethodPost, "/v1/webhook_endpoints/"+oep.ID+"/test", nil, nil)
	var oAttempt string
	waitFor(t, 10*time.Second, "the other partner's test attempt logged", func() bool {
		if as := attempts(t, o, oep.ID); len(as) > 0 {
			oAttempt = as[0].ID
		}
		return oAttempt != ""
	})
	oRecovery, _ := startRecovery(t, o, oep.ID, map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})
	oEvent, _ := feedOfType(t, o, "enrollment.created")[0]["event_id"].(string)
	ep := "/dashboard/endpoints/" + oep.ID
	for _, p := range []string{ep, ep + "/edit", ep + "/delete", ep + "/recoveries/" + oRecovery, ep + "/attempts/" + oAttempt,
		"/dashboard/events/" + oEvent, "/dashboard/enrollments/" + theirs, "/dashboard/enrollments/" + theirs + "/cancel",
		"/dashboard/enrollments/" + theirs + "/pause", "/dashboard/enrollments/" + theirs + "/resume"} {
		if status, page := d.get(p); status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", p, status, heading(page))
		}
	}
	for _, p := range []string{ep + "/edit", ep + "/delete", ep + "/test", ep + "/rotate", ep + "/disable", ep + "/enable", ep + "/resend", ep + "/recover",
		"/dashboard/enrollments/" + theirs + "/cancel", "/dashboard/enrollments/" + theirs + "/pause", "/dashboard/enrollments/" + theirs + "/resume"} {
		f := d.form()
		f.Set("url", rc.URL)
		f.Set("event_types", "*")
		f.Set("event_id", oEvent)
		f.Set("since", time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04"))
		if status, page := d.post(p, f); status != http.StatusNotFound {
			t.Errorf("POST %s: %d %s", p, status, heading(page))
		}
	}
	// Their own event through my endpoint is not found either.
	f := d.form()
	f.Set("event_id", oEvent)
	if status, _ := d.post("/dashboard/endpoints/"+mineEndpoint+"/resend", f); status != http.StatusNotFound {
		t.Errorf("resend another partner's event: %d", status)
	}
	if state, _ := endpointState(t, o, oep.ID); state != "enabled" {
		t.Errorf("the other partner's endpoint is %s", state)
	}
	if got := o.Do(http.MethodGet, "/v1/enrollments/"+theirs, nil, nil).Map(t)["status"]; got == "canceled" || got == "paused" {
		t.Errorf("the other partner's enrollment is %s", got)
	}

	// No page shows a phone number, the donor's included.
	for _, p := range []string{"/dashboard/", "/dashboard/endpoints", "/dashboard/endpoints/" + mineEndpoint, "/dashboard/events",
		"/dashboard/event-types", "/dashboard/enrollments", "/dashboard/enrollments/" + mine, "/dashboard/churches"} {
		status, page := d.get(p)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, status, heading(page))
		}
		if phoneDigits.MatchString(page) {
			t.Errorf("%s shows a phone number: %s", p, phoneDigits.FindString(page))
		}
	}
}

func TestDashboardPolicyHeaders(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	d := newDashClient(t, ts.URL)
	link := dashboardLink(t, c)
	d.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, _ := d.do(http.MethodPost, link, url.Values{}, nil)
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/dashboard"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("the session cookie lacks %s: %s", want, cookie)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("a cookie over http is marked Secure: %s", cookie)
	}
	resp, _ = d.do(http.MethodGet, "/dashboard/", nil, nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("policy %q", csp)
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options %q", got)
	}

	// Behind https the cookie is Secure; a partner who embeds the
	// dashboard names its own origin as the frame ancestor.
	embedded := startStack(t, withPublicURL("https://giving.example"), func(cfg *stack.Config) { cfg.FrameAncestors = "https://admin.partner.example" })
	ec, _ := embedded.partner(t)
	link = dashboardLink(t, ec)
	e := newDashClient(t, embedded.URL)
	e.hc.CheckRedirect = d.hc.CheckRedirect
	resp, _ = e.do(http.MethodPost, embedded.URL+strings.TrimPrefix(link, "https://giving.example"), url.Values{}, nil)
	if !strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("a cookie behind https is not Secure: %s", resp.Header.Get("Set-Cookie"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "frame-ancestors https://admin.partner.example") || resp.Header.Get("X-Frame-Options") != "" {
		t.Errorf("embedded policy %q, X-Frame-Options %q", csp, resp.Header.Get("X-Frame-Options"))
	}
}

func TestDashboardFromTheCLI(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), nil, "--demo")
	waitFor(t, 10*time.Second, "the demo block", func() bool { return strings.Contains(srv.Stdout.String(), `-d '{"churches":`) })
	out := srv.Stdout.String()
	demoLink := regexp.MustCompile(`Dashboard:\s+(\S+)`).FindStringSubmatch(out)
	key := regexp.MustCompile(`API key:\s+(sk_test_\w+)`).FindStringSubmatch(out)
	if demoLink == nil || key == nil {
		t.Fatalf("serve --demo printed no dashboard link:\n%s", out)
	}
	if status, page := newDashClient(t, srv.URL).post(demoLink[1], url.Values{}); status != http.StatusOK || heading(page) != "Overview" {
		t.Fatalf("the demo link: %d %s", status, heading(page))
	}
	r := runCLI(t, nil, "dashboard", "--base-url", srv.URL, "--api-key", key[1])
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, srv.URL+"/dashboard/login/") {
		t.Fatalf("giving dashboard: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if status, page := newDashClient(t, srv.URL).post(strings.TrimSpace(r.Stdout), url.Values{}); status != http.StatusOK || heading(page) != "Overview" {
		t.Fatalf("the CLI's link: %d %s", status, heading(page))
	}
	if r := runCLI(t, nil, "dashboard", "--base-url", srv.URL, "--api-key", "nope"); r.Code != 2 || !strings.Contains(r.Stderr, "--api-key") {
		t.Fatalf("a bad key: %d %s", r.Code, r.Stderr)
	}
}

// A link made on one instance opens on another, and the session it starts
// works on both: links and sessions live in a bucket the instances share,
// and the CSRF token is derived from the shared master key.
func TestDashboardAcrossInstances(t *testing.T) {
	t.Parallel()
	a := startStack(t, func(c *stack.Config) { c.Ledger.NATSListen = "127.0.0.1:0" })
	key, err := os.ReadFile(filepath.Join(a.Dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := startStack(t, func(c *stack.Config) {
		c.Ledger.NATSURL, c.MasterKey = a.Ledger.ClientURL(), strings.TrimSpace(string(key))
	})
	c, _ := a.partner(t)
	b.waitProjected(t)
	link := dashboardLink(t, c)
	onB := newDashClient(t, b.URL)
	if status, page := onB.post(b.URL+strings.TrimPrefix(link, a.URL), url.Values{}); status != http.StatusOK || heading(page) != "Overview" {
		t.Fatalf("a link of instance a opened on b: %d %s", status, heading(page))
	}
	form := onB.form()
	onA := newDashClient(t, a.URL)
	onA.hc.Jar.SetCookies(mustURL(t, a.URL+"/dashboard/"), onB.hc.Jar.Cookies(mustURL(t, b.URL+"/dashboard/")))
	if status, page := newDashClient(t, a.URL).post(link, url.Values{}); status != http.StatusForbidden {
		t.Fatalf("the link reused on a: %d %s", status, heading(page))
	}
	if status, page := onA.get("/dashboard/endpoints"); status != http.StatusOK {
		t.Fatalf("b's session on a: %d %s", status, heading(page))
	}
	// A form drawn by b is good on a; signing out there ends the session
	// on b too.
	if status, page := onA.post("/dashboard/logout", form); status != http.StatusOK || heading(page) != "Signed out" {
		t.Fatalf("b's form posted to a: %d %s", status, heading(page))
	}
	if status, _ := onB.get("/dashboard/"); status != http.StatusUnauthorized {
		t.Fatalf("a session signed out on a still works on b: %d", status)
	}
}
