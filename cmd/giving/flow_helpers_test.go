package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// testClock is the stack's clock in flow tests: real time plus an offset the
// test moves forward, so codes and urls expire without waiting.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func withClock(c *testClock) stackOption {
	return func(cfg *stackConfig) { cfg.Now = c.now }
}

// withNATSListen lets other processes (the CLI) reach the stack's embedded
// NATS server.
func withNATSListen(addr string) stackOption {
	return func(cfg *stackConfig) { cfg.Ledger.NATSListen = addr }
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

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	h1Element = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
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

// ledgerEvents reads every event of one type from the ledger.
func ledgerEvents(t *testing.T, l *eventlog.Ledger, eventType string) []domain.Event {
	t.Helper()
	var out []domain.Event
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().OfType(eventType), after, 500)
		if err != nil {
			t.Fatalf("read ledger: %v", err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			out = append(out, ev)
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}

// sessionEvents counts one session's events of one type.
func sessionEvents(t *testing.T, l *eventlog.Ledger, sessionID, eventType string) int {
	t.Helper()
	n := 0
	for _, ev := range ledgerEvents(t, l, eventType) {
		if ev.AggregateID == sessionID {
			n++
		}
	}
	return n
}

// waitSessionStatus polls the API until the session has status.
func waitSessionStatus(t *testing.T, c *apitest.Client, id, status string) sessionResponse {
	t.Helper()
	var s sessionResponse
	eventlogtest.WaitFor(t, 10*time.Second, "session "+id+" to become "+status, func() bool {
		c.Do(http.MethodGet, "/v1/donor_sessions/"+id, nil, nil).JSON(t, &s)
		return s.Status == status
	})
	return s
}
