package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// The identity-wait pages wait accessibly: no self-refresh, a "Check again"
// link that works without JavaScript, and an optional script (served from
// the binary, allowed by these pages' CSP alone) that checks again by itself
// and announces the change in a live region.

const flowWaitCSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var inlineScript = regexp.MustCompile(`<script(\s[^>]*)?>`)

// checkWaitPage fails unless p is an identity-wait page as described above,
// whose script first checks after every seconds.
func checkWaitPage(t *testing.T, p flowPage, every int) {
	t.Helper()
	if strings.Contains(strings.ToLower(p.Body), "http-equiv") {
		t.Fatalf("a wait page refreshes itself: %s", p.Body)
	}
	path := p.URL[strings.Index(p.URL, "/flow/"):]
	for _, want := range []string{
		`<a class="button" id="check-again" href="` + path + `" data-every="` + strconv.Itoa(every) + `">Check again</a>`,
		`<p id="wait-news" role="status"></p>`,
		`<script src="/assets/wait.js?v=`,
	} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the wait page lacks %s:\n%s", want, p.Body)
		}
	}
	for _, tag := range inlineScript.FindAllString(p.Body, -1) {
		if !strings.Contains(tag, `src="/assets/wait.js?v=`) {
			t.Fatalf("a script other than wait.js: %s", tag)
		}
	}
	if got := p.Header.Get("Content-Security-Policy"); got != flowWaitCSP {
		t.Fatalf("wait page CSP %q, want %q", got, flowWaitCSP)
	}
}

// simulateKYC has the sandbox identity vendor decide the donor's check.
func simulateKYC(t *testing.T, c *apitest.Client, church, donor, outcome string) {
	t.Helper()
	r := c.Do(http.MethodPost, "/sandbox/simulate/kyc", `{"church_id":"`+church+`","donor_id":"`+donor+`","outcome":"`+outcome+`"}`, nil)
	if r.Status != http.StatusOK || r.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("simulate kyc: %d %s", r.Status, r.Body)
	}
}

func TestFlowWaitWithoutJavaScript(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550123", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)

	// The sandbox tells the donor the code; the page says so.
	p := d.open("")
	if !strings.Contains(p.Body, `<p class="note" id="sandbox-note"><strong>Sandbox:</strong> no text message is sent. The code is always <code>000000</code>.</p>`) {
		t.Fatalf("the code page lacks the sandbox hint: %s", p.Body)
	}
	checkFlowHeaders(t, p) // no script on any other page
	verifiedDonor(t, d)
	d.page.expect(t, http.StatusOK, "Check your identity")
	checkFlowHeaders(t, d.page)
	d.verifyIdentity("wait").expect(t, http.StatusOK, "Checking your identity")
	checkWaitPage(t, d.page, 5)

	// "Check again" is a plain link to the flow's page.
	d.open("").expect(t, http.StatusOK, "Checking your identity")
	simulateKYC(t, c, church, s.DonorID, "review")
	d.open("").expect(t, http.StatusOK, "We're reviewing your details")
	checkWaitPage(t, d.page, 30)
	simulateKYC(t, c, church, s.DonorID, "passed")
	p = d.open("")
	p.expect(t, http.StatusOK, "Connect your payroll")
	checkFlowHeaders(t, p)

	// The script is an embedded asset like the stylesheet.
	resp, err := http.Get(ts.URL + "/assets/wait.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("wait.js: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestFlowWaitInBrowser: in Chromium the checking page's script notices the
// identity decision by itself, announces it in the live region, and opens
// the next step.
func TestFlowWaitInBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550123", "pct", "3", "https://partner.example/done")
	tb := b.tab(t)
	tb.open(s.URL, "Confirm it's you")
	if note := tb.text(`document.getElementById("sandbox-note").textContent`); note != "Sandbox: no text message is sent. The code is always 000000." {
		t.Fatalf("sandbox note: %q", note)
	}
	tb.verifyPhone()
	tb.consent("Check your identity")
	tb.verifyIdentity("wait", "Checking your identity")
	waitFor(t, 5*time.Second, "the wait script to start", func() bool {
		return tb.text(`String(document.getElementById("wait-auto").hidden)`) == "false"
	})
	// What the live region says is kept across the navigation that follows.
	tb.text(`(new MutationObserver(function () {
		sessionStorage.setItem("news", document.getElementById("wait-news").textContent);
	}).observe(document.getElementById("wait-news"), {childList: true, characterData: true, subtree: true}), "")`)

	simulateKYC(t, c, church, s.DonorID, "passed")
	tb.waitPage("Connect your payroll")
	if news := tb.text(`sessionStorage.getItem("news") || ""`); news != "Update: Connect your payroll. Opening that page now." {
		t.Fatalf("live region said %q", news)
	}
	if m := tb.messages(); len(m) > 0 {
		t.Fatalf("console messages (CSP violations?): %v", m)
	}
}
