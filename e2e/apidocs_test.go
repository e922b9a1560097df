package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// GET / answers a browser with a landing page that links the reference,
// and any other client with the not-found problem; /docs and the assets it
// loads come from the binary under a policy that allows only this origin.
func TestRootAndDocsPages(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	browserAccept := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	page := rawDo(t, http.MethodGet, ts.URL+"/", nil, map[string]string{"Accept": browserAccept})
	if page.Status != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page.Body), `href="/docs"`) {
		t.Fatalf("a browser's GET /: %d %s\n%s", page.Status, page.Header.Get("Content-Type"), page.Body)
	}
	for _, accept := range []string{"", "*/*", "application/json", "text/html;q=0"} {
		checkProblem(t, rawDo(t, http.MethodGet, ts.URL+"/", nil, map[string]string{"Accept": accept}), 404, "not-found")
	}
	checkProblem(t, rawDo(t, http.MethodPost, ts.URL+"/", nil, map[string]string{"Accept": browserAccept}), 404, "not-found")

	docs := rawDo(t, http.MethodGet, ts.URL+"/docs", nil, nil)
	csp := docs.Header.Get("Content-Security-Policy")
	if docs.Status != http.StatusOK || !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
		t.Fatalf("GET /docs: %d, CSP %q", docs.Status, csp)
	}
	srcs := regexp.MustCompile(`src="([^"]+)"`).FindAllStringSubmatch(string(docs.Body), -1)
	if len(srcs) != 2 {
		t.Fatalf("/docs loads %d scripts, want Redoc and its start: %s", len(srcs), docs.Body)
	}
	for _, m := range srcs {
		if !strings.HasPrefix(m[1], "/assets/") {
			t.Fatalf("/docs loads %s from elsewhere", m[1])
		}
		if r := rawDo(t, http.MethodGet, ts.URL+m[1], nil, nil); r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("%s: %d %s", m[1], r.Status, r.Header.Get("Content-Type"))
		}
	}
}

// The rendered reference draws the whole document in real Chromium without
// a policy violation or a script error, and axe-core finds 0 violations
// there and on the landing page.
func TestDocsPageAxe(t *testing.T) {
	t.Parallel()
	src, version := axeSource(t)
	ts := startStack(t)
	tb := newBrowser(t).tab(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console: %v\nbody: %s", tb.messages(), tb.text("document.body.innerText.slice(0, 2000)"))
		}
	})
	tb.open(ts.URL+"/docs", "Partner Giving API (1.1.0)")
	// Redoc draws the operations after the heading; wait for the last tag's.
	deadline := time.Now().Add(30 * time.Second)
	for tb.text(`String(document.querySelectorAll("[data-section-id^='operation/']").length)`) == "0" {
		if time.Now().After(deadline) {
			t.Fatal("Redoc drew no operation")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := tb.text(`String(document.querySelectorAll("[data-section-id^='operation/']").length)`); len(n) < 2 {
		t.Fatalf("Redoc drew %s operations; the document has dozens", n)
	}
	tb.audit(src, version)
	// Redoc's sidebar shows its maker's logo from a CDN; the policy
	// blocks it (so nothing leaves the page), and that is the one message
	// allowed.
	blocked := false
	for _, m := range tb.messages() {
		if strings.Contains(m, "https://cdn.redoc.ly/redoc/logo-mini.svg") && strings.Contains(m, "violates the following Content Security Policy") {
			blocked = true
			continue
		}
		t.Errorf("browser console: %s", m)
	}
	if !blocked {
		t.Error("the page's policy did not block Redoc's CDN logo")
	}
	tb.open(ts.URL+"/", "Partner Giving API")
	tb.audit(src, version)
}
