package truvfake

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
)

// The test credentials of the Bridge stand-in. Any password is accepted;
// the user name decides the outcome, as Truv's sandbox does with its own
// goodlogin/goodpassword (Test Credentials,
// docs.truv.com/developers/testing/test-credentials).
const (
	UserGood = "user_good"
	UserBad  = "user_bad"
)

// serveScript serves the stand-in of Truv Bridge's script: the same
// TruvBridge.init({bridgeToken, onSuccess, onLoad, onEvent, onClose})
// and bridge.open()/bridge.close() a page uses with Truv's real script
// (Bridge Events, docs.truv.com/developers/sdks/bridge-events). It opens
// the stand-in widget in a dialog iframe on the fake's own origin and turns
// the widget's messages into the callbacks, so the service's flow page
// works unchanged against the fake by loading this URL instead of
// truv.BridgeScriptURL.
func (f *Fake) serveScript(w http.ResponseWriter, r *http.Request) {
	base, origin := f.publicURL(r)
	baseJS, _ := json.Marshal(base)
	originJS, _ := json.Marshal(origin)
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	js := strings.NewReplacer("__BASE__", string(baseJS), "__ORIGIN__", string(originJS)).Replace(bridgeScript)
	_, _ = w.Write([]byte(js))
}

const bridgeScript = `(function () {
  "use strict";
  var base = __BASE__, origin = __ORIGIN__;
  window.TruvBridge = {
    init: function (opts) {
      var overlay = null;
      function call(name) {
        if (typeof opts[name] === "function") {
          opts[name].apply(null, Array.prototype.slice.call(arguments, 1));
        }
      }
      function onMessage(ev) {
        var m = ev.data;
        if (ev.origin !== origin || !m || m.source !== "truvfake") { return; }
        if (m.type === "CLOSE") { close(); return; }
        call("onEvent", m.type, m.payload || null);
        if (m.type === "SUCCESS") { call("onSuccess", m.payload.public_token, m.payload.metadata || {}); }
      }
      function open() {
        if (overlay) { return; }
        overlay = document.createElement("div");
        overlay.setAttribute("role", "dialog");
        overlay.setAttribute("aria-label", "Connect your payroll");
        overlay.style.cssText = "position:fixed;inset:0;background:rgba(0,0,0,.5);display:flex;align-items:center;justify-content:center;z-index:2147483647";
        var frame = document.createElement("iframe");
        frame.title = "Truv Bridge";
        frame.src = base + "/bridge/" + encodeURIComponent(opts.bridgeToken);
        frame.style.cssText = "width:400px;max-width:100%;height:600px;border:0;background:#fff";
        frame.addEventListener("load", function () { call("onLoad"); }, { once: true });
        overlay.appendChild(frame);
        document.body.appendChild(overlay);
        window.addEventListener("message", onMessage);
      }
      function close() {
        if (!overlay) { return; }
        window.removeEventListener("message", onMessage);
        overlay.remove();
        overlay = null;
        call("onClose");
      }
      return { open: open, close: close };
    }
  };
})();
`

// publicURL is the base URL the widget is served at and its origin: from
// Config.PublicURL, or the origin the browser fetched the script from.
func (f *Fake) publicURL(r *http.Request) (base, origin string) {
	if u, err := url.Parse(f.cfg.PublicURL); err == nil && u.Scheme != "" && u.Host != "" {
		return strings.TrimRight(f.cfg.PublicURL, "/"), u.Scheme + "://" + u.Host
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host, scheme + "://" + r.Host
}

// bridgePage is what the widget shows: the switch the token carries, and a
// sign-in form. Credentials are posted to the fake and go nowhere else.
type bridgePage struct {
	ClientName string
	BankName   string
	Allocation string
	LastFour   string
	Error      string
	Done       bool
	Failed     bool
	Message    template.JS // the postMessage payload, JSON
}

var bridgeTemplate = template.Must(template.New("bridge").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Truv Bridge (stand-in)</title>
<style>body{font-family:system-ui,sans-serif;margin:1.5rem;color:#111}label{display:block;margin-top:.75rem}input{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}button{margin-top:1rem;font-size:1rem;padding:.5rem 1rem}.error{color:#a00}</style>
</head>
<body>
<main>
<h1>Connect your payroll</h1>
{{if .Done}}
  {{if .Failed}}<p class="error" role="alert">We could not sign you in to your payroll provider.</p>
  {{else}}<p role="status">Your direct deposit switch was submitted.</p>{{end}}
  <button type="button" id="close">Close</button>
  <script>
  (function () {
    var msg = {{.Message}};
    if (window.parent !== window) {
      window.parent.postMessage(msg, "*");
      document.getElementById("close").addEventListener("click", function () {
        window.parent.postMessage({source: "truvfake", type: "CLOSE"}, "*");
      });
    }
  })();
  </script>
{{else}}
  <p>{{.ClientName}} will receive {{.Allocation}} in the {{.BankName}} account ending {{.LastFour}}.</p>
  {{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
  <form method="post">
    <label for="username">Payroll user name</label>
    <input id="username" name="username" autocomplete="username" required>
    <label for="password">Payroll password</label>
    <input id="password" name="password" type="password" autocomplete="current-password" required>
    <button type="submit">Connect</button>
  </form>
  <p><small>Test credentials: user_good (success) or user_bad (failure), any password.</small></p>
{{end}}
</main>
</body>
</html>
`))

// serveBridge serves the stand-in widget at /bridge/{bridge_token}: GET
// shows the sign-in form, POST signs in with the test credentials and, like
// Truv, sends the task's webhooks to the service.
func (f *Fake) serveBridge(w http.ResponseWriter, r *http.Request) {
	t, ok := f.openToken(strings.TrimPrefix(r.URL.Path, "/bridge/"))
	if !ok {
		http.Error(w, "This link has expired or is not valid.", http.StatusNotFound)
		return
	}
	page := bridgePage{
		ClientName: t.ClientName,
		BankName:   t.Account.BankName,
		Allocation: allocationWords(t.Account),
		LastFour:   lastFour(t.Account.AccountNumber),
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		switch r.PostForm.Get("username") {
		case UserGood:
			page.Done, page.Message = true, f.complete(t, true)
		case UserBad:
			page.Done, page.Failed, page.Message = true, true, f.complete(t, false)
		default:
			page.Error = "Unknown test user: sign in as user_good or user_bad."
		}
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = bridgeTemplate.Execute(w, page)
}

// complete plays what Truv does once the donor signs in: a link and a task
// are created and the task's status changes are sent as webhooks, in
// order, before the widget says it is done. It returns the widget's
// message to the page: SUCCESS with a public token, or ERROR with Bridge's
// documented error object.
func (f *Fake) complete(t Token, good bool) template.JS {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	linkID, taskID := truv.NewID(), truv.NewID()
	task := func(status string) truv.Webhook {
		w := f.webhook(t, truv.EventTaskStatusUpdated, linkID)
		w.TaskID, w.Status = taskID, status
		return w
	}
	var seq []truv.Webhook
	if good {
		seq = []truv.Webhook{
			task(truv.StatusLogin),
			f.webhook(t, truv.EventLinkConnected, linkID),
			task(truv.StatusSwitchDeposit),
		}
		if !f.cfg.HoldDone {
			seq = append(seq, task(truv.StatusDone))
		}
	} else {
		seq = []truv.Webhook{task(truv.StatusLogin), task("login_error")}
	}
	for _, wh := range seq {
		body, err := json.Marshal(wh)
		if err != nil {
			continue
		}
		f.deliver(ctx, body)
	}
	var msg any
	if good {
		msg = map[string]any{"source": "truvfake", "type": "SUCCESS", "payload": map[string]any{
			"public_token": truv.NewID(), "metadata": map[string]string{"task_id": taskID},
		}}
	} else {
		msg = map[string]any{"source": "truvfake", "type": "ERROR", "payload": map[string]any{
			"error": map[string]string{"error_code": "LOGIN_ERROR", "error_message": "Username or password is incorrect", "error_type": "LINK_ERROR"},
		}}
	}
	b, _ := json.Marshal(msg)
	return template.JS(b)
}

// webhook starts a webhook for a token's user and link.
func (f *Fake) webhook(t Token, eventType, linkID string) truv.Webhook {
	w := truv.Webhook{
		WebhookID:      truv.NewID(),
		EventType:      eventType,
		EventCreatedAt: truv.FormatTime(f.cfg.Now()),
		UserID:         t.UserID,
		LinkID:         linkID,
		Product:        t.ProductType,
		DataSource:     "payroll",
	}
	if t.TrackingInfo != "" {
		ref := t.TrackingInfo
		w.TrackingInfo = &ref
	}
	return w
}

// allocationWords says the token's allocation as the widget shows it.
func allocationWords(a truv.AccountRequest) string {
	switch a.DepositType {
	case "entire":
		return "your entire paycheck"
	case "percent":
		return a.DepositValue + "% of each paycheck"
	}
	h, err := truv.ParseDepositValue(a.DepositValue)
	if err != nil {
		return a.DepositValue + " from each paycheck"
	}
	return truv.Amount(h).String() + " from each paycheck"
}

func lastFour(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[len(s)-4:]
}
