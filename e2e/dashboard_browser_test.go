package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// The partner dashboard walked in a real headless Chromium against a real
// stack and a real webhook receiver: every page and every action, each page
// audited with axe-core at a desktop and at a phone width, and checked for
// phone numbers. With -update-screens the walk also writes each page's
// screenshot at both widths to docs/dashboard/, which the README links.

var updateScreens = flag.Bool("update-screens", false, "write the dashboard's screenshots to docs/dashboard/")

// dashboardWidths are the widths every page is audited (and drawn) at: a
// laptop and a phone, the phone by device-metrics emulation.
var dashboardWidths = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"desktop", 1280, 900, false}, {"phone", 375, 812, true}}

// phoneDigits matches a phone number as a page could show one.
var phoneDigits = regexp.MustCompile(`\+?1?[ -.(]*202[ -.)]*555[ -.]*01\d\d`)

// dashboardLink asks the API for a sign-in link as c's key.
func dashboardLink(t *testing.T, c *apitest.Client) string {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/dashboard_sessions", nil, nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("dashboard session: %d %s", resp.Status, resp.Body)
	}
	link, _ := resp.Map(t)["url"].(string)
	return link
}

// inspect audits the tab's page at each width, checks that it shows no
// phone number and, with -update-screens, saves its screenshots.
func (tb *tab) inspect(src, version, name string) {
	tb.t.Helper()
	for _, w := range dashboardWidths {
		emulate := chromedp.EmulateViewport(w.width, w.height)
		if w.mobile {
			emulate = chromedp.EmulateViewport(w.width, w.height, chromedp.EmulateMobile)
		}
		tb.run("emulate "+w.name, emulate)
		tb.audit(src, version)
		if *updateScreens {
			ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			cancel()
			if err != nil {
				tb.t.Fatalf("screenshot %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join("..", "docs", "dashboard", name+"-"+w.name+".png"), png, 0o644); err != nil {
				tb.t.Fatal(err)
			}
		}
	}
	tb.run("reset the viewport", chromedp.EmulateReset())
	if html := tb.text(`document.documentElement.outerHTML`); phoneDigits.MatchString(html) {
		tb.t.Errorf("%s shows a phone number: %s", name, phoneDigits.FindString(html))
	}
	for _, m := range tb.messages() {
		if strings.Contains(m, "Content Security Policy") || strings.Contains(m, "Content-Security-Policy") {
			tb.t.Errorf("%s: %s", name, m)
		}
	}
}

// body is the page's visible text.
func (tb *tab) body() string {
	tb.t.Helper()
	return tb.text(`document.body.innerText`)
}

// waitText reloads the page until its text holds want.
func (tb *tab) waitText(h1, want string) {
	tb.t.Helper()
	waitFor(tb.t, 20*time.Second, "the page "+h1+" to show "+want, func() bool {
		if strings.Contains(tb.body(), want) {
			return true
		}
		tb.leave()
		tb.run("reload", chromedp.Reload())
		tb.waitPage(h1)
		return false
	})
}

func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	src, version := axeSource(t)
	b := newBrowser(t)
	ts := startStack(t, withRetrySchedule(300*time.Millisecond, 300*time.Millisecond))
	c, pid := ts.partner(t)
	var failing atomic.Bool
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) int {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("receiver down for maintenance"))
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	church := importChurch(t, c, "Grace Chapel")
	_, enrollment, _ := enrollByFlow(t, c, church, "pct", "3", nil)

	tb := b.tab(t)
	tb.open(dashboardLink(t, c), "Open the dashboard")
	tb.inspect(src, version, "login")
	tb.click("#open", "Overview")
	tb.inspect(src, version, "overview-empty")

	// An endpoint: a refused address first, its problem in the page.
	tb.open(ts.URL+"/dashboard/endpoints", "Webhook endpoints")
	tb.inspect(src, version, "endpoints")
	tb.typeInto("#url", "ftp://example.com/hooks")
	tb.run("tick every type", chromedp.Click(chromedp.CSS(`#type-all`)))
	tb.click("#create", "Validation failed")
	if body := tb.body(); !strings.Contains(body, "url") {
		t.Errorf("the problem page names no field: %s", body)
	}
	tb.inspect(src, version, "problem")
	tb.open(ts.URL+"/dashboard/endpoints", "Webhook endpoints")
	tb.typeInto("#url", rc.URL)
	tb.run("tick every type", chromedp.Click(chromedp.CSS(`#type-all`)))
	tb.click("#create", "Endpoint created")
	secret := tb.text(`document.querySelector("#secret").value`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the created page shows %q, not the secret", secret)
	}
	if got := tb.text(`String(document.querySelector("button[data-copy]").hidden)`); got != "false" {
		t.Errorf("the copy button is hidden with script on")
	}
	tb.inspect(src, version, "secret")
	endpointID := tb.text(`document.querySelector("main a").getAttribute("href").split("/").pop()`)
	endpointPage := ts.URL + "/dashboard/endpoints/" + endpointID
	endpointH1 := "Endpoint " + rc.URL

	// A test delivery, answered by the real receiver.
	tb.open(endpointPage, endpointH1)
	tb.click("#test", "Test delivery")
	if body := tb.body(); !strings.Contains(body, "Delivered: the endpoint answered 200") {
		t.Fatalf("test delivery: %s", body)
	}
	tb.inspect(src, version, "test-result")

	// A failing receiver: an event's attempts fail and show as failed.
	failing.Store(true)
	_, failed, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 20*time.Second, "failed attempts of "+failed, func() bool {
		for _, a := range attempts(t, c, endpointID) {
			if a.EventID == failed && a.Exhausted {
				return true
			}
		}
		return false
	})
	failing.Store(false)
	tb.open(endpointPage+"?outcome=failed", endpointH1)
	if body := tb.body(); !strings.Contains(body, "failed") || strings.Contains(body, "\tsucceeded\t") {
		t.Errorf("the failed filter shows: %s", body)
	}
	tb.inspect(src, version, "endpoint")
	tb.click(`table a[href*="/attempts/"]`, "Delivery attempt")
	if body := tb.body(); !strings.Contains(body, failed) || !strings.Contains(body, "500") || !strings.Contains(body, `"event_id": "`+failed+`"`) || !strings.Contains(body, "receiver down for maintenance") {
		t.Errorf("the attempt page: %s", body)
	}
	tb.inspect(src, version, "attempt")

	// Resend the failed event: it arrives.
	defer func() {
		if t.Failed() {
			t.Log(ts.Logs.String())
		}
	}()
	tb.click("#resend-this", endpointH1)
	if body := tb.body(); !strings.Contains(body, "queued for one more delivery attempt") {
		t.Errorf("no resend notice: %s", body)
	}
	waitFor(t, 20*time.Second, "the resent event accepted", func() bool { return rc.accepted()[failed] })

	// Recover the last day: the receiver gets every event again; the
	// recovery's page follows its progress.
	before := rc.received()
	tb.click("#recover", "Recovery")
	tb.inspect(src, version, "recovery")
	tb.waitText("Recovery", "completed")
	waitFor(t, 20*time.Second, "the recovered events", func() bool {
		got := rc.received()
		return got[failed] > before[failed]
	})

	// Disable, then enable.
	tb.open(endpointPage, endpointH1)
	tb.click("#disable", endpointH1)
	if body := tb.body(); !strings.Contains(body, "The endpoint is disabled") || !strings.Contains(body, "manual") {
		t.Errorf("after disable: %s", body)
	}
	if state, _ := endpointState(t, c, endpointID); state != "disabled" {
		t.Errorf("the API says %s after disable", state)
	}
	tb.click("#enable", endpointH1)
	if state, _ := endpointState(t, c, endpointID); state != "enabled" {
		t.Errorf("the API says %s after enable", state)
	}

	// Edit the description; rotate the secret.
	tb.click("#edit", "Edit endpoint")
	tb.inspect(src, version, "endpoint-edit")
	tb.typeInto("#description", "main receiver")
	tb.click("#save", endpointH1)
	if body := tb.body(); !strings.Contains(body, "main receiver") {
		t.Errorf("the edit did not show: %s", body)
	}
	tb.run("keep the old secret for an hour", chromedp.SetValue(chromedp.CSS("#expire_current_in"), "3600"))
	tb.click("#rotate", "Secret rotated")
	if body := tb.body(); !strings.Contains(body, "The previous secret keeps signing beside this one until") {
		t.Errorf("the rotated page names no overlap: %s", body)
	}
	if rotated := tb.text(`document.querySelector("#secret").value`); !strings.HasPrefix(rotated, "whsec_") || rotated == secret {
		t.Errorf("rotated secret %q", rotated)
	}

	// The feed, one event and the deliveries it caused, the catalogue.
	tb.open(ts.URL+"/dashboard/events", "Events")
	tb.inspect(src, version, "events")
	tb.run("choose a type", chromedp.SetValue(chromedp.CSS("#type"), "enrollment.created"))
	tb.click("#filter", "Events")
	tb.click(`a[href="/dashboard/events/`+failed+`"]`, "Event enrollment.created")
	if body := tb.body(); !strings.Contains(body, `"event_type": "enrollment.created"`) || !strings.Contains(body, "failed") {
		t.Errorf("the event page: %s", body)
	}
	tb.inspect(src, version, "event")
	tb.open(ts.URL+"/dashboard/event-types", "Event types")
	if body := tb.body(); !strings.Contains(body, "enrollment.canceled") {
		t.Errorf("the catalogue lacks enrollment.canceled: %s", body)
	}
	tb.inspect(src, version, "event-types")

	// Cancel the enrollment, after a confirmation: enrollment.canceled on
	// the feed and at the receiver.
	tb.open(ts.URL+"/dashboard/enrollments", "Enrollments")
	tb.inspect(src, version, "enrollments")
	tb.open(ts.URL+"/dashboard/enrollments/"+enrollment, "Enrollment")
	tb.inspect(src, version, "enrollment")
	tb.click("#cancel", "Cancel this enrollment?")
	tb.inspect(src, version, "enrollment-cancel")
	tb.typeInto("#reason", "donor asked by phone")
	tb.click("#confirm", "Enrollment")
	if body := tb.body(); !strings.Contains(body, "The enrollment was canceled") || !strings.Contains(body, "enrollment.canceled") {
		t.Errorf("after cancel: %s", body)
	}
	var canceledID string
	for _, e := range feedOfType(t, c, "enrollment.canceled") {
		if p, _ := e["payload"].(map[string]any); p["enrollment_id"] == enrollment {
			canceledID, _ = e["event_id"].(string)
		}
	}
	if canceledID == "" {
		t.Fatal("enrollment.canceled is not on the feed")
	}
	waitFor(t, 20*time.Second, "enrollment.canceled at the receiver", func() bool { return rc.accepted()[canceledID] })

	// Import churches from a CSV file with good and bad rows.
	tb.open(ts.URL+"/dashboard/churches", "Churches")
	tb.inspect(src, version, "churches")
	csvPath := filepath.Join(t.TempDir(), "churches.csv")
	if err := os.WriteFile(csvPath, []byte("name,external_id\nHope Chapel,crm-1\n,crm-2\nRiver Church,crm-1\nStone Church,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tb.run("choose the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{csvPath}))
	tb.click("#import", "Import results")
	rows := tb.text(`Array.from(document.querySelectorAll("tbody tr")).map(function (r) { return r.cells[1].textContent; }).join(",")`)
	if rows != "created,rejected,rejected,created" {
		t.Errorf("import results %s", rows)
	}
	tb.inspect(src, version, "import")

	// The overview with a day of deliveries; every page links the reference.
	tb.open(ts.URL+"/dashboard/", "Overview")
	if got := tb.text(`String(document.querySelectorAll("svg rect").length > 0)`); got != "true" {
		t.Errorf("the chart has no bars")
	}
	// Every attempt of the day is counted, not only those the attempt log
	// keeps: at least each delivery the receiver got.
	delivered := rc.count()
	var charted, chartFailed int
	if _, err := fmt.Sscanf(tb.text(`document.getElementById("chart-desc").textContent`), "%d succeeded and %d failed", &charted, &chartFailed); err != nil {
		t.Fatalf("the chart's description: %v", err)
	}
	if charted+chartFailed < delivered || chartFailed == 0 {
		t.Errorf("the chart counts %d succeeded and %d failed attempts; the receiver got %d deliveries, some failed", charted, chartFailed, delivered)
	}
	// The newest events, newest first: the cancel is among them.
	if body := tb.body(); !strings.Contains(body, canceledID) {
		t.Errorf("the overview's recent events lack %s", canceledID)
	}
	tb.inspect(src, version, "overview")
	if got := tb.text(`String(document.querySelectorAll('a[href="/docs"]').length)`); got == "0" {
		t.Error("the overview does not link the API reference")
	}
	// Delete the endpoint, after a confirmation.
	tb.open(endpointPage, endpointH1)
	tb.click("#delete", "Delete this endpoint?")
	tb.inspect(src, version, "endpoint-delete")
	tb.click("#confirm", "Webhook endpoints")
	if body := tb.body(); !strings.Contains(body, "The endpoint was deleted") {
		t.Errorf("after delete: %s", body)
	}
	checkProblem(t, c.Do(http.MethodGet, "/v1/webhook_endpoints/"+endpointID, nil, nil), http.StatusNotFound, "not-found")

	tb.click(`.logout button`, "Signed out")
	tb.inspect(src, version, "signed-out")
}
