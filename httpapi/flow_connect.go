package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/partnergiving/giving/app"
)

// The payroll widget's page, /flow/{token}/connect: the one flow page that
// runs a vendor's script. It loads the payroll vendor's widget script and
// one inline script that opens the widget with the token the address's
// fragment carries, then comes back to the flow's page when the donor
// finishes or closes it. Its policy allows scripts from the vendor's
// origins and that one inline script (by its hash), frames and requests to
// the vendor's origins only. It writes nothing: the widget was opened on
// the switch by the form that led here.

// widgetOpener is the page's inline script. It reads the token from the
// fragment and takes it out of the address bar, so that a reload does not
// reuse a token that may have expired.
const widgetOpener = `(function () {
  "use strict";
  var flow = location.pathname.replace(/\/connect$/, "");
  var m = /(?:^#|&)bridge=([^&]+)/.exec(location.hash);
  if (history.replaceState) { history.replaceState(null, "", location.pathname); }
  function back() { location.replace(flow); }
  if (!m || !window.TruvBridge) {
    document.getElementById("connect-failed").hidden = false;
    return;
  }
  var bridge = window.TruvBridge.init({bridgeToken: decodeURIComponent(m[1]), onSuccess: back, onClose: back});
  bridge.open();
})();`

// widgetOpenerHash is the inline script's hash, as the page's policy
// names it.
var widgetOpenerHash = func() string {
	sum := sha256.Sum256([]byte(widgetOpener))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// connectCSP is the widget page's policy for the vendor's origins.
func connectCSP(origins []string) string {
	o := strings.Join(origins, " ")
	return "default-src 'none'; script-src " + widgetOpenerHash + " " + o + "; frame-src " + o + "; connect-src " + o +
		"; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// flowConnect shows the widget's page to the session's bound browser
// while the session is at the payroll step; anyone else is sent to the
// flow's page, which says where things stand.
func (s *Server) flowConnect(w http.ResponseWriter, r *http.Request) {
	v := s.visit(r)
	page, err := s.app.ShowPayrollWidget(r.Context(), v)
	switch {
	case err != nil:
		s.flowFail(w, r, err)
	case page.Kind == app.FlowBack:
		http.Redirect(w, r, "/flow/"+v.Token, http.StatusSeeOther)
	default:
		if page.Kind == app.FlowWidget {
			w.Header().Set("Content-Security-Policy", connectCSP(page.Widget.Origins))
		}
		s.renderFlow(w, r, s.flowPage(v, page, ""))
	}
}
