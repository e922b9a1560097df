package httpapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The flow's pages and assets, the API reference's and the dashboard's,
// embedded: nothing is loaded from elsewhere.
//
//go:embed flowui apidocs dashboardui
var uiFiles embed.FS

// flowView is what a flow page shows.
type flowView struct {
	Status int
	Page   string // the template
	Title  string // the page's h1 and title
	// Step is the progress position, from 1, or 0 for pages outside the
	// steps; Labels name the steps (nil: the four of a new gift).
	Step      int
	Labels    []string
	Action    string // the flow's address, "/flow/<token>"
	CSRF      string
	Church    string
	Gift      string // the amount in words
	Error     *flowError
	Poll      int // identity-wait pages: seconds before their script first checks again; 0 elsewhere (no script)
	ReturnURL string
	RequestID string

	PhoneEnd       string // the phone's last two digits
	CodeSent       bool
	TriesLeft      int
	ConsentText    string
	ConsentVersion string
	ConsentDigest  string
	// Payroll is where the payroll switch stands (domain.PayrollState);
	// WidgetScript and WidgetOpener are the widget page's scripts.
	Payroll      domain.PayrollState
	WidgetScript string
	WidgetOpener template.JS
	Sandbox      bool
	// Previous is, on a re-consent session's pages, the amount the donor
	// gives now, in words (Gift is the one asked for).
	Previous string
	Reason   string // why an ended gift ended, in words
	// Brand is what the page shows of the partner: its display name (the
	// partner's name when it has none), logo and links; empty on pages
	// that know no session.
	Brand domain.Brand
	// Reference is what the donor quotes to the partner's support about
	// the gift: its enrollment id, which the partner has from its events.
	Reference string
	// FormOrigin is, on the identity step's page, the identity vendor's
	// origin, where its form's answer leads: the page's CSP lets forms go
	// there too.
	FormOrigin string
	// Resume is true on the identity step's page for a donor who came back
	// from the vendor without finishing.
	Resume bool
}

// reconsentSteps are the steps of a re-consent session.
var reconsentSteps = []string{"Confirm your phone", "Agree to give"}

// flowError is a message for the donor, tied to the form field it is about
// (its id) or to the page when Field is empty.
type flowError struct {
	Field   string
	Message string
}

// flowMessage is the message the flow shows for a code named in the page's
// address (domain.FlowMessage), or nil.
func flowMessage(code domain.Code) *flowError {
	p, ok := domain.FlowMessage(code)
	if !ok {
		return nil
	}
	return &flowError{Field: p.Field, Message: p.Message}
}

func flowNotFoundPage() flowView {
	return flowView{Status: http.StatusNotFound, Page: "notfound", Title: "We can't find this page"}
}

// flowPage is the view of a page the flow's use cases chose, with the
// message flash names on a step's page.
func (s *Server) flowPage(visit app.FlowVisit, p app.FlowPage, flash domain.Code) flowView {
	sess := p.Session
	v := flowView{Status: http.StatusOK, Church: p.Church, Brand: p.Brand}
	switch p.Kind {
	case app.FlowNotFound:
		return flowNotFoundPage()
	case app.FlowUsed:
		v.Status, v.Page, v.Title = http.StatusForbidden, "used", "This link was already used"
	case app.FlowUnavailable:
		v.Status, v.Page, v.Title = http.StatusGone, "unavailable", "This link can no longer be used"
	case app.FlowExpired:
		v.Status, v.Page, v.Title = http.StatusGone, "expired", "This link has expired"
		if sess.Purpose == domain.SessionPurposeUpdate {
			v.Previous = sess.Previous.Words()
		} else {
			v.ReturnURL = returnURL(sess.RedirectURL, sess.ID, domain.SessionExpired)
		}
	case app.FlowGiftCanceled:
		v.Page, v.Title, v.Gift = "canceled", "Your giving was canceled", p.Gift.Words()
	case app.FlowGiftEnded:
		v.Page, v.Title, v.Gift, v.Reason = "ended", "Your giving has ended", p.Gift.Words(), endedBecause[p.EndReason]
	case app.FlowWidget:
		v.Page, v.Title, v.Step = "connect", "Connect your payroll", 4
		v.Action, v.CSRF = "/flow/"+visit.Token, s.csrfToken(sess.ID, p.Secret)
		v.WidgetScript, v.WidgetOpener = p.Widget.ScriptURL, template.JS(widgetOpener)
	case app.FlowStep:
		return s.stepView(visit, p, flash)
	}
	return v
}

// stepView is the bound browser's page for the session's step.
func (s *Server) stepView(visit app.FlowVisit, p app.FlowPage, flash domain.Code) flowView {
	sess := p.Session
	v := flowView{
		Status: http.StatusOK, Action: "/flow/" + visit.Token, CSRF: s.csrfToken(sess.ID, p.Secret),
		Church: p.Church, Brand: p.Brand, Gift: sess.Giving.Words(), Sandbox: p.Sandbox,
		Error: flowMessage(flash),
	}
	reconsent := sess.Purpose == domain.SessionPurposeUpdate
	if reconsent {
		v.Previous, v.Labels = sess.Previous.Words(), reconsentSteps
	}
	switch p.Step {
	case domain.StepVerifyPhone:
		v.Page, v.Title, v.Step = "verify", "Confirm it's you", 1
		v.PhoneEnd = p.PhoneEnding
		v.CodeSent = sess.CodeSentAt != nil
		v.TriesLeft = domain.MaxCodeAttempts - sess.CodeAttempts
		if v.Error != nil && flash == domain.FlowCodeWrong.Code {
			v.Error.Message += " You have " + plural(v.TriesLeft, "try", "tries") + " left."
		}
		if v.Error != nil && flash == domain.ErrResendTooSoon.Code {
			if wait := sess.ResendIn(visit.Now); wait > 0 {
				v.Error.Message = "Please wait " + plural(int((wait+time.Second-1)/time.Second), "second", "seconds") + " before asking for another code."
			}
		}
	case domain.StepConsent:
		v.Page, v.Title, v.Step = "consent", "Agree to give", 2
		v.ConsentText, v.ConsentVersion, v.ConsentDigest = p.ConsentText, domain.ConsentVersion, domain.ConsentDigest(p.ConsentText)
	case domain.StepKYC:
		identityView(p, &v)
	case domain.StepPayroll:
		v.Page, v.Title, v.Step, v.Payroll = "payroll", "Connect your payroll", 4, p.Payroll
		switch p.Payroll {
		case domain.PayrollWaiting:
			v.Title, v.Poll = "Waiting for your payroll provider", 5
		case domain.PayrollRefused:
			v.Title = "We couldn't connect your payroll"
		}
	case domain.StepDone:
		// Its enrollment, or the new amount, was recorded right after the
		// step that completed it; should that have failed, the sweeper
		// records it (app.SweepSessions): a page writes nothing.
		v.Page, v.Reference = "done", sess.EnrollmentID
		if reconsent {
			v.Title = "Your new amount is set"
			break
		}
		v.Title = "You're all set"
		v.ReturnURL = returnURL(sess.RedirectURL, sess.ID, domain.SessionCompleted)
	case domain.StepDeclined:
		v.Page, v.Title = "declined", "We couldn't verify your identity"
		v.ReturnURL = returnURL(sess.RedirectURL, sess.ID, domain.SessionDeclined)
	case domain.StepLocked:
		v.Page, v.Title = "locked", "Too many wrong codes"
		if !reconsent {
			v.ReturnURL = returnURL(sess.RedirectURL, sess.ID, domain.SessionOpen)
		}
	}
	return v
}

// endedBecause says why a gift ended, as the donor reads it.
var endedBecause = map[string]string{
	domain.EndLeftEmployer:   "Your payroll provider told us you no longer work for the employer that paid it.",
	domain.EndSwitchReverted: "Your payroll provider told us the deduction was switched off.",
}

// flowStep is one entry of the progress list.
type flowStep struct {
	Number  int
	Label   string
	Done    bool
	Current bool
}

func progress(current int, labels []string) []flowStep {
	if labels == nil {
		labels = []string{"Confirm your phone", "Agree to give", "Check your identity", "Connect payroll"}
	}
	out := make([]flowStep, len(labels))
	for i, l := range labels {
		out[i] = flowStep{Number: i + 1, Label: l, Done: i+1 < current, Current: i+1 == current}
	}
	return out
}

// errFor is the page's message for field, or "".
func errFor(e *flowError, field string) string {
	if e == nil || e.Field != field {
		return ""
	}
	return e.Message
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// flowPages holds one template per page, each the layout with its body.
var flowPages = parsePages("flowui", template.FuncMap{"asset": assetURL, "steps": progress, "errFor": errFor})

// parsePages reads the pages of one folder of uiFiles: its layout.html
// and, for each page_<name>.html, the layout with that page's body, by name.
func parsePages(dir string, funcs template.FuncMap) map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(uiFiles, dir+"/layout.html"))
	names, err := fs.Glob(uiFiles, dir+"/page_*.html")
	if err != nil || len(names) == 0 {
		panic("httpapi: no pages embedded in " + dir)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, dir+"/page_"), ".html")
		out[page] = template.Must(template.Must(base.Clone()).ParseFS(uiFiles, n))
	}
	return out
}

// renderFlow writes a flow page. It renders into a buffer first, so that a
// template fault becomes a clean error page rather than half a page.
func (s *Server) renderFlow(w http.ResponseWriter, r *http.Request, v flowView) {
	t, ok := flowPages[v.Page]
	if !ok {
		panic("httpapi: no flow page " + v.Page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		logger(r.Context()).Error().Err(err).Str("page", v.Page).Msg("flow page failed to render")
		buf.Reset()
		v = flowView{Status: http.StatusInternalServerError, Page: "trouble", Title: "Something went wrong", RequestID: requestID(r.Context())}
		if err := flowPages["trouble"].ExecuteTemplate(&buf, "layout.html", v); err != nil {
			panic("httpapi: flow trouble page: " + err.Error())
		}
	}
	if v.Poll > 0 {
		w.Header().Set("Content-Security-Policy", flowWaitCSP)
	}
	if v.FormOrigin != "" {
		w.Header().Set("Content-Security-Policy", allowFormsTo(w.Header().Get("Content-Security-Policy"), v.FormOrigin))
	}
	if origin := v.Brand.LogoOrigin(); origin != "" {
		w.Header().Set("Content-Security-Policy", allowImagesFrom(w.Header().Get("Content-Security-Policy"), origin))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(v.Status)
	_, _ = w.Write(buf.Bytes())
}

// allowImagesFrom adds origin to the images csp allows. The partner's logo
// is the one thing a flow page loads from elsewhere: its origin alone is
// allowed, on the pages that show it, never a wildcard. The brand's
// validation keeps the origin a plain scheme, host and port, so it cannot
// add a directive.
func allowImagesFrom(csp, origin string) string {
	return strings.Replace(csp, "img-src 'self'", "img-src 'self' "+origin, 1)
}

// assets are the static files of the flow (flowui) and of the API
// reference (apidocs), each served at /assets/<name>?v=<hash> so that a
// change reaches browsers at once while they cache the rest.
var assets = loadAssets()

type flowAsset struct {
	body        []byte
	contentType string
	version     string
}

func loadAssets() map[string]flowAsset {
	types := map[string]string{".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".js": "text/javascript; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
	out := map[string]flowAsset{}
	for ext, ct := range types {
		for _, dir := range []string{"flowui", "apidocs", "dashboardui"} {
			names, _ := fs.Glob(uiFiles, dir+"/*"+ext)
			for _, n := range names {
				body, err := uiFiles.ReadFile(n)
				if err != nil {
					panic("httpapi: " + err.Error())
				}
				sum := sha256.Sum256(body)
				out[path.Base(n)] = flowAsset{body: body, contentType: ct, version: hex.EncodeToString(sum[:6])}
			}
		}
	}
	return out
}

func assetURL(name string) string {
	a, ok := assets[name]
	if !ok {
		panic("httpapi: no flow asset " + name)
	}
	return "/assets/" + name + "?v=" + a.version
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[mux.Vars(r)["name"]]
	if !ok {
		writeProblem(w, r, domain.ProblemNotFound, "No such asset.", nil)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Header().Set("ETag", `"`+a.version+`"`)
	if r.Header.Get("If-None-Match") == `"`+a.version+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}
