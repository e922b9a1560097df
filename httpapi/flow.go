package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The hosted donor flow: server-rendered pages at the session url. It is not
// part of the partner API (no API key, no Idempotency-Key) and runs no
// partner code. The flow's use cases (app.ShowFlowPage, OpenFlowForm,
// SubmitFlowStep, ShowPayrollWidget) decide what each request does and
// shows; this transport decodes the request, calls one, and renders what
// it answers. Every page is rendered from the session's state, and every
// form posts to an action that decides in domain and answers 303 back to
// the flow's page (post, redirect, get), so refresh and back are safe at
// every step and repeating a form changes nothing once its step is passed.
//
// The first browser to open the url is bound to the session: it gets a
// cookie holding a random binding secret whose hash the session records.
// Any other browser gets the "link already used" page. Forms carry a CSRF
// token derived from the binding secret. That binding is the one write a
// GET makes, since "the first browser to open it" is decided when it
// opens; every other write is a form's, or the sweeper's (an expiry, an
// enrollment or a new amount a failed request left unrecorded).

const (
	flowCookie = "giving_flow"
	// flowFormLimit bounds a flow form's body.
	flowFormLimit = 16 << 10
)

// flowRoutes mounts the hosted flow and its assets.
func (s *Server) flowRoutes(r *mux.Router) {
	r.HandleFunc("/assets/{name}", serveAsset).Methods(http.MethodGet)
	r.Handle("/flow/{token}", flowHeaders(http.HandlerFunc(s.flowShow))).Methods(http.MethodGet)
	action := func(name string, form app.FlowForm) {
		path := "/flow/{token}/" + name
		r.Handle(path, flowHeaders(s.flowPost(form))).Methods(http.MethodPost)
		// A GET on an action (a bookmark, a retyped address) goes back to
		// the flow's page.
		r.Handle(path, flowHeaders(http.HandlerFunc(flowBack))).Methods(http.MethodGet)
	}
	action("code", app.FormSendCode)
	action("verify", app.FormCheckCode)
	action("consent", app.FormConsent)
	action("identity", app.FormIdentity)
	action("payroll", app.FormPayroll)
	r.Handle("/flow/{token}/connect", flowHeaders(http.HandlerFunc(s.flowConnect))).Methods(http.MethodGet)
	r.PathPrefix("/flow/").Handler(flowHeaders(http.HandlerFunc(s.flowUnknown)))
}

// The flow's Content-Security-Policy: no script, styles and images only
// from here, forms only to here, never framed. The two identity-wait pages
// alone may also run a script from here (wait.js, embedded) and fetch from
// here, so that they can check again by themselves; they work without it.
const (
	flowCSP     = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	flowWaitCSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// flowHeaders sets the flow's security headers on every answer: the strict
// Content-Security-Policy, no referrer (the url holds the session's secret
// token), and no caching.
func flowHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", flowCSP)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func flowBack(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/flow/"+mux.Vars(r)["token"], http.StatusSeeOther)
}

// visit is the request as the flow's use cases see it: the url's token,
// the binding secret the browser holds, the time.
func (s *Server) visit(r *http.Request) app.FlowVisit {
	v := app.FlowVisit{Token: mux.Vars(r)["token"], Now: s.now()}
	if c, err := r.Cookie(flowCookie); err == nil {
		v.Held = c.Value
	}
	return v
}

// flowShow renders the page for where the donor stands, giving the
// browser its binding secret when this visit bound the session to it.
func (s *Server) flowShow(w http.ResponseWriter, r *http.Request) {
	v := s.visit(r)
	page, err := s.app.ShowFlowPage(r.Context(), v)
	if err != nil {
		s.flowFail(w, r, err)
		return
	}
	if page.Bound {
		exp := page.Session.ExpiresAt
		http.SetCookie(w, &http.Cookie{
			Name: flowCookie, Value: page.Secret, Path: "/flow/" + v.Token,
			Expires: exp, MaxAge: int(exp.Sub(v.Now) / time.Second),
			HttpOnly: true, Secure: strings.HasPrefix(s.app.PublicURL(), "https://"), SameSite: http.SameSiteLaxMode,
		})
	}
	s.renderFlow(w, r, s.flowPage(v, page, domain.Code(r.URL.Query().Get("e"))))
}

// csrfToken binds a form to the session and to the browser's binding
// secret, which a cross-site page cannot read.
func (s *Server) csrfToken(sessionID, secret string) string {
	m := hmac.New(sha256.New, s.cfg.Keys.CSRF)
	m.Write([]byte(sessionID))
	m.Write([]byte{0})
	m.Write([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// flowPost handles a form: the use cases check that the browser is the
// one bound to the session, the transport that the form carries its CSRF
// token; then the form runs, and the browser goes where it leads (the
// flow's page, with the message it names, or a vendor's page).
func (s *Server) flowPost(form app.FlowForm) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := s.visit(r)
		page, err := s.app.OpenFlowForm(r.Context(), v)
		if err != nil {
			s.flowFail(w, r, err)
			return
		}
		if page.Kind != app.FlowStep {
			s.renderFlow(w, r, s.flowPage(v, page, ""))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, flowFormLimit)
		if err := r.ParseForm(); err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(s.csrfToken(page.Session.ID, page.Secret))) {
			stale := flowView{Status: http.StatusForbidden, Page: "stale", Title: "Please try that again", Action: "/flow/" + v.Token, Church: page.Church, Brand: page.Brand}
			s.renderFlow(w, r, stale)
			return
		}
		f := r.PostForm
		answer, err := s.app.SubmitFlowStep(r.Context(), page.Session, app.FlowSubmission{
			Form: form, Code: f.Get("code"),
			ConsentVersion: f.Get("version"), TermsDigest: f.Get("terms_digest"),
			GiftAgreed: f.Get("gift") == "yes", TermsAgreed: f.Get("terms") == "yes",
		}, v.Now)
		if err != nil {
			s.flowFail(w, r, err)
			return
		}
		if answer.Unavailable {
			page.Kind = app.FlowUnavailable
			s.renderFlow(w, r, s.flowPage(v, page, ""))
			return
		}
		to := "/flow/" + v.Token
		switch {
		case answer.IdentityPage != "":
			to = answer.IdentityPage
		case answer.BridgeToken != "":
			// The widget's token travels in the address's fragment, which
			// the browser keeps to itself: it is never sent back, so it is
			// in no log and nothing stores it.
			to += "/connect#bridge=" + url.PathEscape(answer.BridgeToken)
		case answer.Message != "":
			to += "?e=" + url.QueryEscape(string(answer.Message))
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	})
}

// returnURL is the partner's redirect_url with session_id and status added
// to its own query string, which is kept as it was.
func returnURL(raw, sessionID string, status domain.SessionStatus) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	add := url.Values{"session_id": {sessionID}, "status": {string(status)}}.Encode()
	if u.RawQuery == "" {
		u.RawQuery = add
	} else {
		u.RawQuery += "&" + add
	}
	return u.String()
}

// flowUnknown answers any other address under /flow/ with the not-found
// page (never echoing the path, which may hold a token).
func (s *Server) flowUnknown(w http.ResponseWriter, r *http.Request) {
	s.renderFlow(w, r, flowNotFoundPage())
}

// flowFail shows a fault of ours without detail, and logs it.
func (s *Server) flowFail(w http.ResponseWriter, r *http.Request, err error) {
	logger(r.Context()).Error().Err(err).Msg("flow request failed")
	status := http.StatusInternalServerError
	if errors.Is(err, domain.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusServiceUnavailable
	}
	s.renderFlow(w, r, flowView{Status: status, Page: "trouble", Title: "Something went wrong", RequestID: requestID(r.Context())})
}
