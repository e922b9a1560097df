package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnergiving/giving/domain"
)

// Every hosted-flow page, in every state a donor can see it in, is audited
// with axe-core in headless Chromium: 0 violations of any impact. axe-core
// is pinned in tools/axe (npm ci there); without it the test skips, unless
// GIVING_REQUIRE_BROWSER=1 (CI), where it fails.

const axeDir = "../tools/axe"

// axeSource returns the pinned axe-core script and its version.
func axeSource(t *testing.T) (string, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(axeDir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GIVING_REQUIRE_BROWSER=1 but axe-core is not installed (cd tools/axe && npm ci): %v", err)
		}
		t.Skip("axe-core is not installed; skipping the accessibility audit (cd tools/axe && npm ci)")
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(axeDir, "package.json"))
	if err == nil {
		err = json.Unmarshal(raw, &pkg)
	}
	if err != nil || pkg.DevDependencies["axe-core"] == "" {
		t.Fatalf("tools/axe/package.json does not pin axe-core: %v", err)
	}
	return string(src), pkg.DevDependencies["axe-core"]
}

// axeViolation is what the audit reports of one failed rule.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// audit runs axe-core's default rules on the tab's page (injected through
// DevTools, which the page's CSP does not govern) and reports every
// violation as a test error.
func (tb *tab) audit(src, version string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](src+";\naxe.version"))
	if err != nil {
		tb.t.Fatalf("inject axe-core: %v", err)
	}
	if got != version {
		tb.t.Fatalf("axe-core %s is installed, tools/axe pins %s (cd tools/axe && npm ci)", got, version)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(function (r) {
		return JSON.stringify(r.violations.map(function (v) {
			return {id: v.id, impact: v.impact || "", help: v.help, nodes: v.nodes.map(function (n) { return n.target.join(" ") + ": " + n.failureSummary; })};
		}));
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("run axe-core: %v", err)
	}
	var violations []axeViolation
	if err := json.Unmarshal([]byte(out), &violations); err != nil {
		tb.t.Fatalf("axe-core results: %v: %s", err, out)
	}
	for _, v := range violations {
		tb.t.Errorf("%s: %s (%s): %s\n  %s", tb.text(`document.querySelector("h1").textContent`), v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
	}
}

func TestFlowPagesAxe(t *testing.T) {
	t.Parallel()
	src, version := axeSource(t)
	b := newBrowser(t)
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	// A partner with its whole brand: the header's logo and the footer's
	// links are on every page audited.
	c, _ := brandedPartner(t, ts, "Acme Church Software", acmeBrand)
	church := importChurch(t, c, "Grace Chapel")
	audited := map[string]bool{}
	// check audits the page a tab shows, named by its template, at a
	// phone's width and at a desktop's.
	check := func(t *testing.T, tb *tab, page string) {
		t.Helper()
		tb.audit(src, version)
		tb.run("widen to a desktop", chromedp.EmulateViewport(1280, 900))
		tb.audit(src, version)
		tb.run("back to a phone", chromedp.EmulateReset())
		audited[page] = true
	}
	session := func(t *testing.T, phone string) (sessionResponse, *tab) {
		s := openSession(t, c, church, phone, "pct", "3", "https://partner.example/done")
		tb := b.tab(t)
		tb.open(s.URL, "Confirm it's you")
		return s, tb
	}

	t.Run("the way through, with every error message", func(t *testing.T) {
		s, tb := session(t, "+12025550100")
		check(t, tb, "verify")
		tb.click("#send", "Confirm it's you")
		check(t, tb, "verify") // the code field
		tb.typeInto("#code", "123456")
		tb.click("#confirm", "Confirm it's you")
		check(t, tb, "verify") // a wrong code
		tb.typeInto("#code", "000000")
		tb.click("#confirm", "Agree to give")
		check(t, tb, "consent")
		tb.click("#agree", "Agree to give")
		check(t, tb, "consent") // boxes not ticked
		tb.consent("Connect your payroll")
		check(t, tb, "payroll")
		tb.openPayrollWidget()
		check(t, tb, "connect") // the payroll widget open over it
		// The donor leaves the widget unfinished and comes back.
		tb.open(s.URL, "Waiting for your payroll provider")
		check(t, tb, "payroll") // waiting for the provider's word
		tb.connectPayroll("user_bad", "We couldn't connect your payroll")
		check(t, tb, "payroll") // refused
		tb.connectPayroll("user_good", "You're all set")
		check(t, tb, "done")
	})

	t.Run("identity", func(t *testing.T) {
		_, tb := session(t, "+12025550123")
		tb.verifyPhone()
		tb.consent("Check your identity")
		check(t, tb, "identity")
		tb.click("#identity", "Verify your identity")
		check(t, tb, "the identity stand-in")
		tb.run("wait for the simulator", chromedp.Click(chromedp.CSS("#choice-wait")))
		tb.click("#finish", "Checking your identity")
		check(t, tb, "checking")
		for phone, want := range map[string]struct{ page, h1 string }{
			"+12025550101": {"review", "We're reviewing your details"},
			"+12025550102": {"declined", "We couldn't verify your identity"},
		} {
			_, tb := session(t, phone)
			tb.verifyPhone()
			tb.consent(want.h1)
			check(t, tb, want.page)
		}
	})

	t.Run("locked", func(t *testing.T) {
		_, tb := session(t, "+12025550100")
		tb.click("#send", "Confirm it's you")
		for i := 1; i < domain.MaxCodeAttempts; i++ {
			tb.typeInto("#code", "999999")
			tb.click("#confirm", "Confirm it's you")
		}
		tb.typeInto("#code", "999999")
		tb.click("#confirm", "Too many wrong codes")
		check(t, tb, "locked")
	})

	t.Run("another browser", func(t *testing.T) {
		s, _ := session(t, "+12025550100")
		other := newBrowser(t).tab(t)
		other.open(s.URL, "This link was already used")
		check(t, other, "used")
	})

	t.Run("a forgotten donor", func(t *testing.T) {
		s, tb := session(t, "+12025550100")
		if _, err := ts.Operators.ForgetDonor(context.Background(), ts.Secrets, s.DonorID, ""); err != nil {
			t.Fatal(err)
		}
		tb.open(s.URL, "This link can no longer be used")
		check(t, tb, "unavailable")
	})

	t.Run("no such link", func(t *testing.T) {
		tb := b.tab(t)
		tb.open(ts.URL+"/flow/nope", "We can't find this page")
		check(t, tb, "notfound")
	})

	t.Run("a stale form", func(t *testing.T) {
		_, tb := session(t, "+12025550100")
		tb.text(`(document.querySelector("input[name=csrf]").value = "stale", "")`)
		tb.click("#send", "Please try that again")
		check(t, tb, "stale")
	})

	t.Run("a new amount", func(t *testing.T) {
		_, en, _ := enrollByFlow(t, c, church, "pct", "3", nil)
		_, e := move(t, c, en, "update", `{"value":5}`, http.StatusOK)
		tb := b.tab(t)
		tb.open(e.ConsentURL, "Confirm it's you")
		check(t, tb, "verify")
		tb.verifyPhone()
		check(t, tb, "consent")
		tb.consent("Your new amount is set")
		check(t, tb, "done")
	})

	t.Run("canceled and ended", func(t *testing.T) {
		s, en, _ := enrollByFlow(t, c, church, "pct", "3", nil)
		move(t, c, en, "cancel", nil, http.StatusOK)
		tb := b.tab(t)
		tb.open(s.URL, "Your giving was canceled")
		check(t, tb, "canceled")
		s, en, _ = enrollByFlow(t, c, church, "fixed", "10", nil)
		simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "deposit_switch_reverted"})
		tb.open(s.URL, "Your giving has ended")
		check(t, tb, "ended")
	})

	// Moving the clock expires every open session of the stack: last.
	t.Run("expired", func(t *testing.T) {
		s, tb := session(t, "+12025550100")
		_, en, _ := enrollByFlow(t, c, church, "pct", "3", nil)
		_, e := move(t, c, en, "update", `{"value":5}`, http.StatusOK)
		clock.advance(domain.SessionLifetime + time.Second)
		tb.open(s.URL, "This link has expired")
		check(t, tb, "expired")
		tb.open(e.ConsentURL, "This link has expired")
		check(t, tb, "expired") // a new amount's
	})

	// A ledger that does not answer: the trouble page, on a stack of its own.
	t.Run("trouble", func(t *testing.T) {
		down := startStack(t)
		dc, _ := down.partner(t, "https://partner.example")
		s := openSession(t, dc, importChurch(t, dc, "Grace Chapel"), "+12025550100", "pct", "3", "https://partner.example/done")
		tb := b.tab(t)
		tb.open(s.URL, "Confirm it's you")
		down.Ledger.Close()
		tb.open(s.URL, "Something went wrong")
		check(t, tb, "trouble")
	})

	// Every page the flow has was audited.
	pages, err := filepath.Glob("../httpapi/flowui/page_*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no flow pages found: %v", err)
	}
	var missed []string
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "page_"), ".html")
		if !audited[name] {
			missed = append(missed, name)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("flow pages never audited: %v", missed)
	}
}
