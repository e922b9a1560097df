package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
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
	sess, ok := s.flowSession(w, r)
	if !ok {
		return
	}
	token := mux.Vars(r)["token"]
	secret, bound := boundSecret(r, sess)
	if !bound || sess.Step(s.now()) != domain.StepPayroll {
		http.Redirect(w, r, "/flow/"+token, http.StatusSeeOther)
		return
	}
	church, err := s.app.ChurchName(sess)
	if err != nil {
		s.flowFail(w, r, err)
		return
	}
	widget := s.app.PayrollWidget()
	v := s.branded(sess, flowView{
		Status: http.StatusOK, Page: "connect", Title: "Connect your payroll", Step: 4, Church: church,
		Action: "/flow/" + token, CSRF: s.csrfToken(sess.ID, secret),
		WidgetScript: widget.ScriptURL, WidgetOpener: template.JS(widgetOpener),
	})
	w.Header().Set("Content-Security-Policy", connectCSP(widget.Origins))
	s.renderFlow(w, r, v)
}
