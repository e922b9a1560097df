package app

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/partnergiving/giving/domain"
)

// The hosted flow's pages as use cases. ShowFlowPage says what a visit to
// a session's url shows, OpenFlowForm whether a browser may post one of its
// forms, SubmitFlowStep runs the form, and ShowPayrollWidget says whether
// the payroll vendor's widget page opens. The transport decodes the
// request, calls one of them, and renders what it answers: it decides
// nothing of the flow.

// FlowPageKind names the page a visit shows.
type FlowPageKind int

const (
	// FlowNotFound: no session has this url.
	FlowNotFound FlowPageKind = iota
	// FlowStep: the session's current step, FlowPage.Step.
	FlowStep
	// FlowExpired: the url ran out before the session completed.
	FlowExpired
	// FlowUsed: another browser opened the url first.
	FlowUsed
	// FlowUnavailable: the session cannot go on (it was closed, or its
	// donor's phone was erased).
	FlowUnavailable
	// FlowGiftCanceled and FlowGiftEnded: the gift the session made, or is
	// for, was canceled or has ended; nothing can be done there any more.
	FlowGiftCanceled
	FlowGiftEnded
	// FlowWidget: the payroll vendor's widget page (ShowPayrollWidget).
	FlowWidget
	// FlowBack: the address is not a page of its own now; the browser goes
	// back to the flow's page, which says where things stand.
	FlowBack
)

// FlowVisit is a browser's request at a session's url.
type FlowVisit struct {
	Token string
	// Held is the binding secret the browser presents (its cookie), or "".
	Held string
	Now  time.Time
}

// FlowPage is what a visit shows.
type FlowPage struct {
	Kind FlowPageKind
	// Session is the session the url opens; zero for FlowNotFound.
	Session domain.Session
	// Secret is, on the pages of the bound browser (FlowStep, FlowWidget),
	// its binding secret: what its forms' tokens derive from. Bound is true
	// when this visit bound the session to the browser, which must then be
	// given the secret (a cookie).
	Secret string
	Bound  bool
	// Church and Brand name whom the page is for. A page outside the steps
	// has a message of its own and shows it without them when they cannot
	// be read.
	Church string
	Brand  domain.Brand
	// Sandbox is true on the sandbox's stack: the steps say which test
	// values decide.
	Sandbox bool

	// Step is the session's step, on a FlowStep page. What the step shows:
	// the phone's last two digits (StepVerifyPhone), the consent's text
	// (StepConsent), where the identity check stands and the vendor's
	// origin its form leads to when it is not this service's
	// (StepKYC), where the payroll switch stands (StepPayroll).
	Step           domain.FlowStep
	PhoneEnding    string
	ConsentText    string
	Identity       IdentityStage
	IdentityOrigin string
	Payroll        domain.PayrollState

	// Gift and EndReason are, on FlowGiftCanceled and FlowGiftEnded, the
	// gift that ended and why (domain.EndLeftEmployer, ...).
	Gift      domain.Giving
	EndReason string

	// Widget is the payroll vendor's widget, on FlowWidget.
	Widget PayrollWidget
}

// flowTokenLength is the length of a url token: 32 bytes, base64url.
const flowTokenLength = 43

// ShowFlowPage says what a visit to a session's url shows. It writes
// nothing but the binding of the first browser to open the url, which is
// decided when it opens; every other write is a form's, or the sweeper's.
func (s *Service) ShowFlowPage(ctx context.Context, v FlowVisit) (FlowPage, error) {
	s = s.as("app.ShowFlowPage")
	sess, ok, err := s.flowSession(v.Token)
	if err != nil || !ok {
		return FlowPage{Kind: FlowNotFound}, err
	}
	if page, closed, err := s.giftClosed(sess); err != nil || closed {
		return page, err
	}
	if sess.Step(v.Now) == domain.StepExpired {
		return s.aside(FlowExpired, sess), nil
	}
	page, err := s.bind(ctx, sess, v)
	if err != nil || page.Kind != FlowStep {
		return page, err
	}
	return s.stepPage(ctx, page, v.Now)
}

// flowSession finds the session a url token opens. A token that is not of
// the form the service issues is not looked up.
func (s *Service) flowSession(token string) (domain.Session, bool, error) {
	if _, err := base64.RawURLEncoding.DecodeString(token); len(token) != flowTokenLength || err != nil {
		return domain.Session{}, false, nil
	}
	return s.SessionByToken(token)
}

// giftClosed is the page of a session whose gift (the one it made or is
// for) was canceled or has ended, if it was. It has no form, and is shown
// to any browser holding the link, bound or not: it tells no more than the
// link's holder knows, that a gift to the church ended.
func (s *Service) giftClosed(sess domain.Session) (FlowPage, bool, error) {
	e, ok, err := s.SessionEnrollment(sess)
	if err != nil || !ok || !e.Status.Final() {
		return FlowPage{}, false, err
	}
	kind := FlowGiftEnded
	if e.Status == domain.EnrollmentCanceled {
		kind = FlowGiftCanceled
	}
	page, err := s.namedAside(kind, sess)
	page.Gift, page.EndReason = e.Giving, e.EndReason
	return page, true, err
}

// aside is a page outside the session's steps, with whom it is for when
// that can be read.
func (s *Service) aside(kind FlowPageKind, sess domain.Session) FlowPage {
	page, _ := s.namedAside(kind, sess)
	return page
}

// namedAside is aside for a page that must name the session's church: it
// also returns the error reading it.
func (s *Service) namedAside(kind FlowPageKind, sess domain.Session) (FlowPage, error) {
	page := FlowPage{Kind: kind, Session: sess, Sandbox: s.cfg.Env == domain.Sandbox}
	var err error
	page.Church, err = s.ChurchName(sess)
	page.Brand, _ = s.Brand(sess)
	return page, err
}

// bind recognises the browser the session is bound to, or binds the
// session to this browser when it is the first to open it. Another
// instance may have bound the session to this very browser before these
// projections applied it: the decision is made on the session as the
// ledger holds it, with the secret the browser already holds, if any.
func (s *Service) bind(ctx context.Context, sess domain.Session, v FlowVisit) (FlowPage, error) {
	if sess.BindingHash != "" {
		if boundTo(sess, v.Held) {
			return FlowPage{Kind: FlowStep, Session: sess, Secret: v.Held}, nil
		}
		return s.aside(FlowUsed, sess), nil
	}
	held := ""
	if v.Held != "" {
		held = domain.HashSecret(v.Held)
	}
	fresh := randomSecret()
	after, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.Bind(cur, held, domain.HashSecret(fresh), v.Now)
	})
	switch {
	case errors.Is(err, domain.ErrLinkUsed):
		return s.aside(FlowUsed, sess), nil
	case errors.Is(err, domain.ErrSessionClosed):
		return s.aside(FlowUnavailable, sess), nil
	case err != nil:
		return FlowPage{}, err
	}
	if boundTo(after, v.Held) {
		return FlowPage{Kind: FlowStep, Session: after, Secret: v.Held}, nil // bound elsewhere to this browser
	}
	return FlowPage{Kind: FlowStep, Session: after, Secret: fresh, Bound: true}, nil
}

// boundTo reports whether secret is the one the session is bound to.
func boundTo(sess domain.Session, secret string) bool {
	return secret != "" && sess.BindingHash != "" && hmac.Equal([]byte(domain.HashSecret(secret)), []byte(sess.BindingHash))
}

// randomSecret is a fresh binding secret.
func randomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("app: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// stepPage fills in the bound browser's page for the session's step.
func (s *Service) stepPage(ctx context.Context, page FlowPage, now time.Time) (FlowPage, error) {
	sess := page.Session
	var err error
	if page.Church, err = s.ChurchName(sess); err != nil {
		return FlowPage{}, err
	}
	if page.Brand, err = s.Brand(sess); err != nil {
		return FlowPage{}, err
	}
	page.Sandbox = s.cfg.Env == domain.Sandbox
	if sess.Status == domain.SessionOpen {
		// A donor who was forgotten cannot go on: their phone is gone.
		if err := s.checkDonor(ctx, sess); err != nil {
			return s.forgotten(sess, err)
		}
	}
	page.Step = sess.Step(now)
	switch page.Step {
	case domain.StepVerifyPhone:
		if page.PhoneEnding, err = s.PhoneEnding(ctx, sess); err != nil {
			return s.forgotten(sess, err)
		}
	case domain.StepConsent:
		page.ConsentText = domain.ConsentText(page.Brand.ConsentTerms(page.Church), sess.Giving)
	case domain.StepKYC:
		page.Identity = s.IdentityStage(ctx, sess)
		if origin := s.IdentityPageOrigin(); origin != strings.TrimRight(s.cfg.PublicURL, "/") {
			page.IdentityOrigin = origin
		}
	case domain.StepPayroll:
		page.Payroll = sess.Payroll()
	case domain.StepExpired:
		return s.aside(FlowExpired, sess), nil
	}
	return page, nil
}

// forgotten is the unavailable page when err says the donor was forgotten,
// and err otherwise.
func (s *Service) forgotten(sess domain.Session, err error) (FlowPage, error) {
	if errors.Is(err, ErrDonorForgotten) {
		return s.aside(FlowUnavailable, sess), nil
	}
	return FlowPage{}, err
}

// OpenFlowForm finds the session a form posts to and checks that the
// browser posting it is the one bound to the session: FlowStep, with the
// session and the browser's secret, or the page to show instead
// (FlowNotFound, FlowUsed).
func (s *Service) OpenFlowForm(ctx context.Context, v FlowVisit) (FlowPage, error) {
	s = s.as("app.OpenFlowForm")
	sess, ok, err := s.flowSession(v.Token)
	if err != nil || !ok {
		return FlowPage{Kind: FlowNotFound}, err
	}
	if !boundTo(sess, v.Held) && v.Held != "" && sess.BindingHash == "" {
		// This instance may not have applied the binding yet: check the
		// browser against the session as the ledger holds it.
		if sess, err = s.sessionFromLedger(ctx, sess); err != nil {
			return FlowPage{}, err
		}
	}
	if !boundTo(sess, v.Held) {
		return s.aside(FlowUsed, sess), nil
	}
	return FlowPage{Kind: FlowStep, Session: sess, Secret: v.Held, Step: sess.Step(v.Now)}, nil
}

// sessionFromLedger loads a session from the ledger, which may be ahead of
// the local projections.
func (s *Service) sessionFromLedger(ctx context.Context, sess domain.Session) (domain.Session, error) {
	return s.updateSession(ctx, sess.PartnerID, sess.ID, func(*domain.Session) (*domain.Event, error) { return nil, nil })
}

// ShowPayrollWidget says whether the payroll vendor's widget page opens:
// FlowWidget for the session's bound browser while the session is at the
// payroll step, FlowBack for anyone else. It writes nothing: the widget
// was opened on the switch by the form that led there.
func (s *Service) ShowPayrollWidget(ctx context.Context, v FlowVisit) (FlowPage, error) {
	s = s.as("app.ShowPayrollWidget")
	sess, ok, err := s.flowSession(v.Token)
	if err != nil || !ok {
		return FlowPage{Kind: FlowNotFound}, err
	}
	if !boundTo(sess, v.Held) || sess.Step(v.Now) != domain.StepPayroll {
		return FlowPage{Kind: FlowBack, Session: sess}, nil
	}
	page, err := s.namedAside(FlowWidget, sess)
	if err != nil {
		return FlowPage{}, err
	}
	page.Secret, page.Step, page.Widget = v.Held, domain.StepPayroll, s.PayrollWidget()
	return page, nil
}

// FlowForm names one of the flow's forms.
type FlowForm int

const (
	FormSendCode FlowForm = iota + 1
	FormCheckCode
	FormConsent
	FormIdentity
	FormPayroll
)

// FlowSubmission is a form as the donor filled it in.
type FlowSubmission struct {
	Form FlowForm
	// Code is the verification code as entered (FormCheckCode).
	Code string
	// ConsentVersion and TermsDigest name the consent text the page showed;
	// GiftAgreed and TermsAgreed are its two boxes (FormConsent).
	ConsentVersion, TermsDigest string
	GiftAgreed, TermsAgreed     bool
}

// FlowAnswer is where a form leads.
type FlowAnswer struct {
	// Message names the message the flow's page shows next (a flow problem
	// of domain's catalogue), or is empty.
	Message domain.Code
	// Unavailable is true when the donor cannot go on: the unavailable
	// page is shown.
	Unavailable bool
	// IdentityPage is the identity vendor's page to send the browser to
	// (FormIdentity; empty when the donor waits for the vendor's decision
	// instead).
	IdentityPage string
	// BridgeToken opens the payroll vendor's widget (FormPayroll). It
	// reaches the browser only: it is stored nowhere and logged nowhere.
	BridgeToken string
}

// SubmitFlowStep runs a form of the bound browser (OpenFlowForm) on the
// session. A form whose step is over changes nothing: the donor is shown
// where they stand. What the donor can mend or retry is a Message; an
// error is a fault of the service.
func (s *Service) SubmitFlowStep(ctx context.Context, sess domain.Session, sub FlowSubmission, now time.Time) (FlowAnswer, error) {
	s = s.as("app.SubmitFlowStep")
	if sess.Step(now) == domain.StepExpired {
		return FlowAnswer{}, nil
	}
	answer, err := s.submit(ctx, sess, sub, now)
	var de *domain.Error
	switch {
	case err == nil:
		return answer, nil
	case errors.Is(err, domain.ErrWrongStep) || errors.Is(err, domain.ErrSessionClosed):
		return FlowAnswer{}, nil
	case errors.As(err, &de):
		if _, ok := domain.FlowMessage(de.Code); ok {
			return FlowAnswer{Message: de.Code}, nil
		}
	case errors.Is(err, ErrPhoneService):
		return FlowAnswer{Message: domain.FlowSMSFailed.Code}, nil
	case errors.Is(err, ErrPayrollService):
		return FlowAnswer{Message: domain.FlowPayrollUnavailable.Code}, nil
	case errors.Is(err, ErrDonorForgotten):
		return FlowAnswer{Unavailable: true}, nil
	}
	return FlowAnswer{}, err
}

func (s *Service) submit(ctx context.Context, sess domain.Session, sub FlowSubmission, now time.Time) (FlowAnswer, error) {
	switch sub.Form {
	case FormSendCode:
		return FlowAnswer{}, s.SendCode(ctx, sess, now)
	case FormCheckCode:
		code := strings.Map(func(r rune) rune {
			if r == ' ' || r == '-' {
				return -1
			}
			return r
		}, sub.Code)
		if !sixDigits(code) {
			return FlowAnswer{Message: domain.FlowCodeFormat.Code}, nil
		}
		res, err := s.CheckCode(ctx, sess, code, now)
		if err != nil || res.Correct || res.Locked {
			return FlowAnswer{}, err
		}
		return FlowAnswer{Message: domain.FlowCodeWrong.Code}, nil
	case FormConsent:
		if sub.ConsentVersion != domain.ConsentVersion {
			return FlowAnswer{Message: domain.FlowConsentChanged.Code}, nil
		}
		if !sub.GiftAgreed || !sub.TermsAgreed {
			return FlowAnswer{Message: domain.FlowConsentMissing.Code}, nil
		}
		return FlowAnswer{}, s.Consent(ctx, sess, sub.TermsDigest, now)
	case FormIdentity:
		page, err := s.StartIdentity(ctx, sess, now)
		return FlowAnswer{IdentityPage: page}, err
	case FormPayroll:
		token, err := s.StartPayroll(ctx, sess, now)
		return FlowAnswer{BridgeToken: token}, err
	}
	return FlowAnswer{}, domain.ErrWrongStep
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
