package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
)

// The partner's dashboard: server-rendered pages at /dashboard that do in a
// browser what a partner's engineer otherwise does with curl. A browser is
// signed in by a single-use link (POST /v1/dashboard_sessions) and then
// carries a session cookie that acts as the API key that asked for the
// link, for as long as that key works.
//
// The pages hold no rules of their own: every read and every action runs
// the API's own route in-process for the session's key (callAPI), through
// the same decoding, validation, use case, Idempotency-Key claim and rate
// limit as a partner's call, and reads the same views, so a page shows
// exactly what the API shows (never donor PII) and answers another
// partner's id with the same 404. Each form carries an Idempotency-Key
// made when the form was rendered, so a double submit acts once, and a
// CSRF token bound to the session.

const (
	dashboardCookie = "giving_dashboard"
	// dashboardFormLimit bounds a dashboard form's body; a church import's
	// CSV of 1000 rows fits.
	dashboardFormLimit = 1 << 20
)

// dashboardCSP lets a page load its own script, styles and images only,
// post forms only here, and be framed only by the configured ancestors.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors "

// DefaultFrameAncestors is who may frame the dashboard unless configured:
// nobody.
const DefaultFrameAncestors = "'none'"

// dashRequest is one request of a signed-in browser.
type dashRequest struct {
	principal projections.Principal
	cookie    string
}

type dashHandler func(w http.ResponseWriter, r *http.Request, d *dashRequest)

func (s *Server) dashboardRoutes(r *mux.Router) {
	r.Handle(app.DashboardPath+"/login/{token}", s.dashHeaders(http.HandlerFunc(s.dashLoginPage))).Methods(http.MethodGet)
	r.Handle(app.DashboardPath+"/login/{token}", s.dashHeaders(http.HandlerFunc(s.dashLogin))).Methods(http.MethodPost)
	page := func(path string, h dashHandler) {
		r.Handle(app.DashboardPath+path, s.dashHeaders(s.dashSession(h))).Methods(http.MethodGet)
	}
	action := func(path string, h dashHandler) {
		r.Handle(app.DashboardPath+path, s.dashHeaders(s.dashSession(s.dashForm(h)))).Methods(http.MethodPost)
	}
	page("", s.dashOverview)
	page("/", s.dashOverview)
	action("/logout", s.dashLogout)
	page("/endpoints", s.dashEndpoints)
	action("/endpoints", s.dashCreateEndpoint)
	page("/endpoints/{id}", s.dashEndpoint)
	page("/endpoints/{id}/edit", s.dashEditEndpoint)
	action("/endpoints/{id}/edit", s.dashUpdateEndpoint)
	page("/endpoints/{id}/delete", s.dashConfirmDelete)
	action("/endpoints/{id}/delete", s.dashDeleteEndpoint)
	action("/endpoints/{id}/test", s.dashTestEndpoint)
	action("/endpoints/{id}/rotate", s.dashRotateSecret)
	action("/endpoints/{id}/{switch:disable|enable}", s.dashSwitchEndpoint)
	action("/endpoints/{id}/resend", s.dashResend)
	action("/endpoints/{id}/recover", s.dashRecover)
	page("/endpoints/{id}/recoveries/{recovery_id}", s.dashRecovery)
	page("/endpoints/{id}/attempts/{attempt_id}", s.dashAttempt)
	page("/events", s.dashEvents)
	page("/events/{id}", s.dashEvent)
	page("/event-types", s.dashEventTypes)
	page("/enrollments", s.dashEnrollments)
	page("/enrollments/{id}", s.dashEnrollment)
	page("/enrollments/{id}/{move:cancel|pause|resume}", s.dashConfirmMove)
	action("/enrollments/{id}/{move:cancel|pause|resume}", s.dashMove)
	page("/churches", s.dashChurches)
	action("/churches/import", s.dashImport)
	r.PathPrefix(app.DashboardPath + "/").Handler(s.dashHeaders(s.dashSession(func(w http.ResponseWriter, r *http.Request, d *dashRequest) {
		s.dashNotFound(w, r, d)
	})))
}

// dashHeaders sets every dashboard answer's policy: its own script and
// styles only, framed only where the operator allows, never cached.
func (s *Server) dashHeaders(next http.Handler) http.Handler {
	ancestors := s.cfg.FrameAncestors
	if ancestors == "" {
		ancestors = DefaultFrameAncestors
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", dashboardCSP+ancestors)
		switch ancestors {
		case "'none'":
			h.Set("X-Frame-Options", "DENY")
		case "'self'":
			h.Set("X-Frame-Options", "SAMEORIGIN")
		}
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// secureCookies reports whether the service is reached over https, where
// the session cookie is marked Secure.
func (s *Server) secureCookies() bool {
	return strings.HasPrefix(s.app.PublicURL(), "https://")
}

// dashLoginPage asks the browser to confirm the sign-in: opening the link
// is a POST, so a mail scanner or a chat preview that fetches the link does
// not spend it.
func (s *Server) dashLoginPage(w http.ResponseWriter, r *http.Request) {
	s.renderDash(w, r, nil, dashView{Page: "login", Title: "Open the dashboard", Data: r.URL.Path})
}

// dashLogin spends the link and signs the browser in.
func (s *Server) dashLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.dashRefuse(w, r, nil)
		return
	}
	cookie, expires, err := s.app.OpenDashboard(r.Context(), mux.Vars(r)["token"])
	switch {
	case errors.Is(err, app.ErrDashboardLinkUsed):
		s.renderDash(w, r, nil, dashView{Status: http.StatusForbidden, Page: "signedout", Title: "This link was already used",
			Data: "A sign-in link opens the dashboard once. Ask for a new one: POST /v1/dashboard_sessions, or giving dashboard --api-key."})
		return
	case errors.Is(err, app.ErrDashboardLinkInvalid):
		s.renderDash(w, r, nil, dashView{Status: http.StatusGone, Page: "signedout", Title: "This link has expired",
			Data: "A sign-in link works for 10 minutes, and only while the API key that asked for it works. Ask for a new one."})
		return
	case err != nil:
		s.dashFail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: dashboardCookie, Value: cookie, Path: app.DashboardPath, Expires: expires,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, app.DashboardPath+"/", http.StatusSeeOther)
}

func (s *Server) dashLogout(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	if err := s.app.SignOutDashboard(r.Context(), d.cookie); err != nil {
		s.dashFail(w, r, d, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: "", Path: app.DashboardPath, MaxAge: -1,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteStrictMode})
	s.renderDash(w, r, nil, dashView{Page: "signedout", Title: "Signed out", Data: "Open a new sign-in link to come back."})
}

// dashSession admits a browser with a live session: its cookie names a
// session that is neither over nor signed out, and whose key still works.
func (s *Server) dashSession(next dashHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(dashboardCookie)
		if err != nil || c.Value == "" {
			s.dashSignedOut(w, r)
			return
		}
		p, ok, err := s.app.DashboardSession(r.Context(), c.Value)
		if err != nil {
			s.dashFail(w, r, nil, err)
			return
		}
		if !ok {
			s.dashSignedOut(w, r)
			return
		}
		info(r.Context()).principal = &p
		next(w, r, &dashRequest{principal: p, cookie: c.Value})
	})
}

func (s *Server) dashSignedOut(w http.ResponseWriter, r *http.Request) {
	s.renderDash(w, r, nil, dashView{Status: http.StatusUnauthorized, Page: "signedout", Title: "Sign in to the dashboard",
		Data: "The dashboard opens with a sign-in link: ask for one with POST /v1/dashboard_sessions, or giving dashboard --api-key. A session lasts 8 hours, and ends when the API key that asked for it is revoked or expires."})
}

// dashForm checks a form post: it must come from a dashboard page (same
// origin) and carry the session's CSRF token.
func (s *Server) dashForm(next dashHandler) dashHandler {
	return func(w http.ResponseWriter, r *http.Request, d *dashRequest) {
		r.Body = http.MaxBytesReader(w, r.Body, dashboardFormLimit)
		var err error
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
			err = r.ParseMultipartForm(dashboardFormLimit)
		} else {
			err = r.ParseForm()
		}
		if err != nil {
			s.dashProblem(w, r, d, problem{Title: domain.ProblemPayloadTooLarge.Title, Status: http.StatusRequestEntityTooLarge,
				Detail: "The form could not be read; a file to import may hold up to 1 MiB."})
			return
		}
		want := s.csrfToken("dashboard", d.cookie)
		if !sameOrigin(r) || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(want)) {
			s.dashRefuse(w, r, d)
			return
		}
		next(w, r, d)
	}
}

// sameOrigin refuses what a browser says came from another site: Fetch
// Metadata where the browser sends it, else the Origin header.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return origin == ""
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func (s *Server) dashRefuse(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	s.dashProblem(w, r, d, problem{Title: "Form refused", Status: http.StatusForbidden,
		Detail: "This form did not come from a page of your dashboard session, or the page is older than the session. Open the page again and resubmit."})
}

// apiAnswer is what an API route answered the dashboard.
type apiAnswer struct {
	status int
	body   []byte
}

func (a apiAnswer) ok() bool { return a.status >= 200 && a.status < 300 }

// problem reads the answer's problem+json.
func (a apiAnswer) problem() problem {
	var p problem
	if err := json.Unmarshal(a.body, &p); err != nil || p.Title == "" {
		p = problem{Title: http.StatusText(a.status), Detail: "The service answered without a problem description."}
	}
	p.Status = a.status
	return p
}

// callAPI runs an API route in-process as the session's key: through the
// router, the rate limit and (for POST and PATCH) the Idempotency-Key
// claim, exactly as the partner's own call would. idemKey is the key the
// form was rendered with; body, when not nil, is sent as JSON.
func (s *Server) callAPI(r *http.Request, d *dashRequest, method, target, idemKey string, body any) apiAnswer {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			panic("httpapi: dashboard body: " + err.Error())
		}
	}
	outer := info(r.Context())
	p := d.principal
	ri := &requestInfo{id: outer.id, log: outer.log, route: "(unmatched)", principal: &p}
	req, err := http.NewRequestWithContext(context.WithValue(r.Context(), ctxInfo, ri), method, target, bytes.NewReader(raw))
	if err != nil {
		return apiAnswer{status: http.StatusBadRequest, body: problemBody(domain.ProblemMalformedRequest, "The address could not be read.", outer.id, nil)}
	}
	req.Host = r.Host
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	rec := &recorder{header: http.Header{}}
	s.router.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return apiAnswer{status: rec.status, body: rec.body.Bytes()}
}

// dashGet reads an API route into out; on an error answer it renders the
// problem and reports false.
func (s *Server) dashGet(w http.ResponseWriter, r *http.Request, d *dashRequest, target string, out any) bool {
	a := s.callAPI(r, d, http.MethodGet, target, "", nil)
	if !a.ok() {
		s.dashProblem(w, r, d, a.problem())
		return false
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		s.dashFail(w, r, d, err)
		return false
	}
	return true
}

// dashAct runs a form's action (its Idempotency-Key is the form's) and
// reads a success into out (nil: no body); on an error answer it renders
// the problem and reports false.
func (s *Server) dashAct(w http.ResponseWriter, r *http.Request, d *dashRequest, method, target string, body, out any) bool {
	key := r.PostFormValue("idempotency_key")
	if method == http.MethodDelete {
		key = ""
	}
	a := s.callAPI(r, d, method, target, key, body)
	if !a.ok() {
		s.dashProblem(w, r, d, a.problem())
		return false
	}
	if out == nil {
		return true
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		s.dashFail(w, r, d, err)
		return false
	}
	return true
}

// dashDone answers a finished action by sending the browser to a page with
// a notice (post, redirect, get), so a reload does not post again.
func dashDone(w http.ResponseWriter, r *http.Request, to, notice string) {
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	http.Redirect(w, r, app.DashboardPath+to+sep+"notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// dashNotices are the messages a redirect may ask a page to show.
var dashNotices = map[string]string{
	"disabled": "The endpoint is disabled: no delivery starts until it is enabled.",
	"enabled":  "The endpoint is enabled. Events from now on are delivered; use Recover for what it missed.",
	"deleted":  "The endpoint was deleted.",
	"updated":  "The endpoint was updated.",
	"resent":   "The event was queued for one more delivery attempt; it shows in the attempts below once made.",
	"canceled": "The enrollment was canceled.",
	"paused":   "The enrollment was paused.",
	"resumed":  "The enrollment was resumed.",
}

func (s *Server) dashNotFound(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	s.dashProblem(w, r, d, problem{Title: domain.ProblemNotFound.Title, Status: http.StatusNotFound, Detail: "There is no dashboard page at this address."})
}

// dashProblem renders an error answer: the problem's title and detail, and
// its field errors.
func (s *Server) dashProblem(w http.ResponseWriter, r *http.Request, d *dashRequest, p problem) {
	if p.RequestID == "" {
		p.RequestID = requestID(r.Context())
	}
	s.renderDash(w, r, d, dashView{Status: p.Status, Page: "problem", Title: p.Title, Problem: &p})
}

// dashFail renders a failure of ours, logged.
func (s *Server) dashFail(w http.ResponseWriter, r *http.Request, d *dashRequest, err error) {
	logger(r.Context()).Error().Err(err).Msg("dashboard request failed")
	p := problem{Title: domain.ProblemUnavailable.Title, Status: http.StatusServiceUnavailable, Detail: "The service could not answer this page just now. Try again in a moment."}
	s.dashProblem(w, r, d, p)
}

// newFormKey is a fresh Idempotency-Key for one rendered form.
func newFormKey() string { return "dashboard-" + rand.Text() }

// formMinute is how a datetime-local field writes a time.
const formMinute = "2006-01-02T15:04"

// formTime reads a datetime-local field (UTC) as RFC 3339; empty is nil.
func formTime(v string) (*string, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(formMinute, v)
	if err != nil {
		if t, err = time.Parse("2006-01-02T15:04:05", v); err != nil {
			return nil, err
		}
	}
	out := domain.FormatTime(t)
	return &out, nil
}

// CheckFrameAncestors refuses a frame-ancestors source list that would
// break the dashboard's policy header: it must be one line of sources
// without a semicolon or a comma.
func CheckFrameAncestors(v string) error {
	if strings.TrimSpace(v) == "" || strings.ContainsAny(v, ";,\r\n") {
		return errors.New("must be a CSP frame-ancestors source list, such as 'none', 'self' or https://admin.example.com")
	}
	return nil
}
