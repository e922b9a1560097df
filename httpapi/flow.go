package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
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
// partner code. Every page is rendered from the session's state, and every
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
	// flowTokenLength is the length of a url token: 32 bytes, base64url.
	flowTokenLength = 43
)

// flowRoutes mounts the hosted flow and its assets.
func (s *Server) flowRoutes(r *mux.Router) {
	r.HandleFunc("/assets/{name}", serveAsset).Methods(http.MethodGet)
	r.Handle("/flow/{token}", flowHeaders(http.HandlerFunc(s.flowShow))).Methods(http.MethodGet)
	action := func(name string, h flowAction) {
		path := "/flow/{token}/" + name
		r.Handle(path, flowHeaders(s.flowPost(h))).Methods(http.MethodPost)
		// A GET on an action (a bookmark, a retyped address) goes back to
		// the flow's page.
		r.Handle(path, flowHeaders(http.HandlerFunc(flowBack))).Methods(http.MethodGet)
	}
	action("code", s.flowSendCode)
	action("verify", s.flowCheckCode)
	action("consent", s.flowConsent)
	action("identity", s.flowIdentity)
	action("payroll", s.flowPayroll)
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

// flowSession finds the session the request's url token opens, or answers
// the request itself (the not-found page, or a failure page) and reports
// false. A token that is not of the form the service issues is not looked
// up.
func (s *Server) flowSession(w http.ResponseWriter, r *http.Request) (domain.Session, bool) {
	token := mux.Vars(r)["token"]
	var (
		sess domain.Session
		ok   bool
		err  error
	)
	if _, decErr := base64.RawURLEncoding.DecodeString(token); len(token) == flowTokenLength && decErr == nil {
		sess, ok, err = s.app.SessionByToken(token)
	}
	if err != nil {
		s.flowFail(w, r, err)
		return sess, false
	}
	if !ok {
		s.renderFlow(w, r, flowNotFoundPage())
	}
	return sess, ok
}

// flowShow renders the page for where the donor stands.
func (s *Server) flowShow(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.flowSession(w, r)
	if !ok {
		return
	}
	if s.flowEnrollmentClosed(w, r, sess) {
		return
	}
	token := mux.Vars(r)["token"]
	now := s.now()
	if sess.Step(now) == domain.StepExpired {
		s.flowExpired(w, r, sess)
		return
	}
	secret, ok := s.flowBind(w, r, token, &sess, now)
	if !ok {
		return
	}
	f := &flowRequest{token: token, sess: sess, secret: secret, now: now}
	s.renderStep(w, r, f, r.URL.Query().Get("e"))
}

// flowExpired shows the expiry page. The sweeper records the expiry
// (donor_session.expired) within a second of it: a page writes nothing.
func (s *Server) flowExpired(w http.ResponseWriter, r *http.Request, sess domain.Session) {
	v := flowView{Status: http.StatusGone, Page: "expired", Title: "This link has expired"}
	if sess.Purpose == domain.SessionPurposeUpdate {
		v.Previous = sess.Previous.Words()
	} else {
		v.ReturnURL = returnURL(sess.RedirectURL, sess.ID, domain.SessionExpired)
	}
	s.renderFlow(w, r, s.branded(sess, v))
}

// flowBind checks the browser's binding cookie, binding the session to this
// browser when it is the first to open it. It returns the binding secret,
// or false after answering with the "link already used" page.
func (s *Server) flowBind(w http.ResponseWriter, r *http.Request, token string, sess *domain.Session, now time.Time) (string, bool) {
	if sess.BindingHash != "" {
		if secret, ok := boundSecret(r, *sess); ok {
			return secret, true
		}
		s.renderFlow(w, r, s.branded(*sess, flowUsedPage()))
		return "", false
	}
	// This instance shows no binding, but another may have bound the
	// session to this very browser before these projections applied it:
	// the decision is made on the session as the ledger holds it, with the
	// secret the browser already holds, if any.
	_, heldHash := heldSecret(r)
	fresh := randomSecret()
	after, err := s.app.BindBrowser(r.Context(), *sess, heldHash, domain.HashSecret(fresh), now)
	switch {
	case errors.Is(err, domain.ErrLinkUsed):
		s.renderFlow(w, r, s.branded(*sess, flowUsedPage()))
		return "", false
	case errors.Is(err, domain.ErrSessionClosed):
		s.renderFlow(w, r, s.branded(*sess, flowUnavailablePage()))
		return "", false
	case err != nil:
		s.flowFail(w, r, err)
		return "", false
	}
	*sess = after
	if secret, ok := boundSecret(r, after); ok {
		return secret, true // recognised: bound elsewhere to this browser
	}
	http.SetCookie(w, &http.Cookie{
		Name: flowCookie, Value: fresh, Path: "/flow/" + token,
		Expires: sess.ExpiresAt, MaxAge: int(sess.ExpiresAt.Sub(now) / time.Second),
		HttpOnly: true, Secure: strings.HasPrefix(s.app.PublicURL(), "https://"), SameSite: http.SameSiteLaxMode,
	})
	return fresh, true
}

// heldSecret is the binding secret the browser presents and its hash, or
// two empty strings.
func heldSecret(r *http.Request) (string, string) {
	c, err := r.Cookie(flowCookie)
	if err != nil || c.Value == "" {
		return "", ""
	}
	return c.Value, domain.HashSecret(c.Value)
}

// boundSecret returns the browser's binding secret when it is the one the
// session is bound to.
func boundSecret(r *http.Request, sess domain.Session) (string, bool) {
	secret, hash := heldSecret(r)
	if secret == "" || sess.BindingHash == "" {
		return "", false
	}
	return secret, hmac.Equal([]byte(hash), []byte(sess.BindingHash))
}

func randomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("httpapi: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
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

// flowRequest is one request of a bound browser.
type flowRequest struct {
	token  string
	sess   domain.Session
	secret string
	now    time.Time
	form   url.Values
	// next, when an action sets it, is where the browser goes instead of
	// the flow's page.
	next string
}

// flowAction handles a form. It returns the flash naming the message to
// show on the page it redirects to ("" for none); a wrong-step or
// closed-session error means the form's step is over, and the donor is simply
// shown where they stand now.
type flowAction func(ctx context.Context, f *flowRequest) (flash string, err error)

// flowPost runs the checks every form shares (a known token, the bound
// browser, a valid CSRF token, an unexpired session), then the action, then
// redirects back to the flow's page.
func (s *Server) flowPost(action flowAction) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.flowSession(w, r)
		if !ok {
			return
		}
		token := mux.Vars(r)["token"]
		var err error
		secret, ok := boundSecret(r, sess)
		if held, _ := heldSecret(r); !ok && held != "" && sess.BindingHash == "" {
			// This instance may not have applied the binding yet: check
			// the browser against the session as the ledger holds it.
			if sess, err = s.app.SessionFromLedger(r.Context(), sess); err != nil {
				s.flowFail(w, r, err)
				return
			}
			secret, ok = boundSecret(r, sess)
		}
		if !ok {
			s.renderFlow(w, r, s.branded(sess, flowUsedPage()))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, flowFormLimit)
		if err := r.ParseForm(); err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(s.csrfToken(sess.ID, secret))) {
			s.renderFlow(w, r, s.branded(sess, flowView{Status: http.StatusForbidden, Page: "stale", Title: "Please try that again", Action: "/flow/" + token}))
			return
		}
		f := &flowRequest{token: token, sess: sess, secret: secret, now: s.now(), form: r.PostForm}
		flash := ""
		if sess.Step(f.now) != domain.StepExpired {
			flash, err = action(r.Context(), f)
		}
		var de *domain.Error
		switch {
		case errors.Is(err, domain.ErrWrongStep) || errors.Is(err, domain.ErrSessionClosed):
		case errors.As(err, &de) && flowMessage(string(de.Code)) != nil:
			flash = string(de.Code)
		case errors.Is(err, app.ErrPhoneService):
			flash = string(domain.FlowSMSFailed.Code)
		case errors.Is(err, app.ErrPayrollService):
			flash = string(domain.FlowPayrollUnavailable.Code)
		case errors.Is(err, app.ErrDonorForgotten):
			s.renderFlow(w, r, s.branded(sess, flowUnavailablePage()))
			return
		case err != nil:
			s.flowFail(w, r, err)
			return
		}
		to := "/flow/" + token
		if err == nil && f.next != "" {
			to = f.next
		} else if flash != "" {
			to += "?e=" + url.QueryEscape(flash)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	})
}

// flowSendCode sends a verification code (the first, or a resend).
func (s *Server) flowSendCode(ctx context.Context, f *flowRequest) (string, error) {
	return "", s.app.SendCode(ctx, f.sess, f.now)
}

// flowCheckCode checks an entered code.
func (s *Server) flowCheckCode(ctx context.Context, f *flowRequest) (string, error) {
	code := strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, f.form.Get("code"))
	if !sixDigits(code) {
		return string(domain.FlowCodeFormat.Code), nil
	}
	res, err := s.app.CheckCode(ctx, f.sess, code, f.now)
	if err != nil || res.Correct || res.Locked {
		return "", err
	}
	return string(domain.FlowCodeWrong.Code), nil
}

func sixDigits(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// flowConsent records the donor's consent to the text the page showed.
func (s *Server) flowConsent(ctx context.Context, f *flowRequest) (string, error) {
	if f.form.Get("version") != domain.ConsentVersion {
		return string(domain.FlowConsentChanged.Code), nil
	}
	if f.form.Get("gift") != "yes" || f.form.Get("terms") != "yes" {
		return string(domain.FlowConsentMissing.Code), nil
	}
	return "", s.app.Consent(ctx, f.sess, f.form.Get("terms_digest"), f.now)
}

// flowPayroll opens the payroll vendor's widget: it sends the browser to
// the page that loads it, with the widget's token in the address's
// fragment, which the browser keeps to itself (it is never sent back, so
// it is in no log and nothing stores it).
func (s *Server) flowPayroll(ctx context.Context, f *flowRequest) (string, error) {
	token, err := s.app.StartPayroll(ctx, f.sess, f.now)
	if err != nil {
		return "", err
	}
	f.next = "/flow/" + f.token + "/connect#bridge=" + url.PathEscape(token)
	return "", nil
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
