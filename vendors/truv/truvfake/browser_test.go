package truvfake_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
)

// hostScript is what a flow page runs with Truv's real script: init with
// the bridge token, open, and react to the callbacks.
const hostScript = `(function () {
  var out = document.getElementById("out");
  var bridge = TruvBridge.init({
    bridgeToken: document.body.dataset.token,
    onLoad: function () { out.dataset.loaded = "yes"; },
    onSuccess: function (publicToken, meta) { out.textContent = "success " + publicToken + " " + meta.task_id; },
    onEvent: function (type) { out.dataset.events = (out.dataset.events || "") + type + ";"; },
    onClose: function () { out.dataset.closed = "yes"; }
  });
  bridge.open();
})();`

// TestBridgeScriptInABrowser opens the stand-in from a page on another
// origin under the CSP the service's payroll page will send (no inline
// script; scripts and frames from the vendor's origin only), signs in as
// user_good, and checks the page's callbacks fire as Truv Bridge's do.
func TestBridgeScriptInABrowser(t *testing.T) {
	chromium := chromiumPath(t)
	fake, e, sw := setup(t)

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/host.js" {
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, hostScript)
			return
		}
		w.Header().Set("Content-Security-Policy", fmt.Sprintf(
			"default-src 'none'; script-src 'self' %[1]s; frame-src %[1]s; style-src 'self'", fake.URL))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Payroll</title>
<script src="%s"></script></head>
<body data-token="%s"><p id="out">waiting</p><script src="/host.js"></script></body></html>`, fake.BridgeScriptURL(), sw.BridgeToken)
	}))
	defer host.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The first run starts the browser; it must not carry the test's
	// timeout, which would stop the browser when it ends.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(browser, 60*time.Second)
	defer cancelTimeout()

	// Both servers listen on 127.0.0.1, so the widget's frame is same-site
	// and its nodes can be reached from the page's.
	widget := chromedp.CSS(`iframe[title="Truv Bridge"]`)
	frame := func() *chromedp.Node {
		t.Helper()
		nodes, err := chromedp.Run(ctx, chromedp.Nodes(widget))
		if err != nil || len(nodes) == 0 {
			t.Fatalf("find the widget's frame: %v", err)
		}
		return nodes[0]
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(host.URL+"/"), chromedp.WaitReady(widget)); err != nil {
		t.Fatalf("open the host page: %v", err)
	}
	// The dialog's styles are set through the DOM, which a CSP without
	// 'unsafe-inline' styles still allows, as it allows Truv's own.
	waitFor(t, ctx, `getComputedStyle(document.querySelector("iframe").parentElement).position`, func(s string) bool { return s == "fixed" })
	in := chromedp.FromNode(frame())
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS("#username"), in),
		chromedp.SendKeys(chromedp.CSS("#username"), truvfake.UserGood, in),
		chromedp.SendKeys(chromedp.CSS("#password"), "any-password", in),
		chromedp.Submit(chromedp.CSS("#username"), in),
	)
	if err != nil {
		t.Fatalf("sign in inside the widget: %v", err)
	}
	out := waitFor(t, ctx, `document.getElementById("out").textContent`, func(s string) bool { return strings.HasPrefix(s, "success ") })
	if f := strings.Fields(out); len(f) != 3 || len(f[1]) != 32 || f[2] == "undefined" {
		t.Errorf("onSuccess got %q, want a public token and the task id", out)
	}
	if loaded, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("out").dataset.loaded || ""`)); loaded != "yes" {
		t.Errorf("onLoad did not fire")
	}
	if events, _ := e.accepted(); len(events) != 2 || events[1].Type != truv.SwitchConfirmed {
		t.Errorf("edge accepted %+v, want the switch submitted and confirmed", events)
	}

	// Close, as the donor does after the success screen: onClose fires and
	// the dialog goes away.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#close"), chromedp.FromNode(frame()), chromedp.NodeVisible)); err != nil {
		t.Fatalf("press close: %v", err)
	}
	waitFor(t, ctx, `(document.getElementById("out").dataset.closed || "") + "|" + document.querySelectorAll("iframe").length`,
		func(s string) bool { return s == "yes|0" })
}

// waitFor evaluates expr until ok accepts its value, and returns it.
func waitFor(t *testing.T, ctx context.Context, expr string, ok func(string) bool) string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err == nil {
			last = v
			if ok(v) {
				return v
			}
		}
	}
	t.Fatalf("%s is still %q", expr, last)
	return ""
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
		t.Fatal("GIVING_REQUIRE_BROWSER=1 but chromium is not installed")
	}
	t.Skip("chromium is not installed")
	return ""
}
