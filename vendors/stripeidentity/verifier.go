package stripeidentity

import (
	"context"
	"net/url"

	"github.com/partnergiving/giving/domain"
)

// HostedOrigin is the origin of Stripe's hosted verification pages, where
// a session's url leads (verify.stripe.com/start/...). Stripe's reference
// does not name it; it is the origin every published integration redirects
// to.
const HostedOrigin = "https://verify.stripe.com"

// Metadata keys the Verifier sets besides ReferenceKey, which carries the
// donor id: the church and the donor session, both the service's opaque
// ids, so that an event leads back to the donor and an operator reading
// Stripe's Dashboard finds the session.
const (
	ChurchKey  = "church_id"
	SessionKey = "donor_session_id"
)

// Verifier is the service's identity-verification port on a Client: it
// starts, reads and cancels VerificationSessions for donors and says where
// each stands in the service's terms (domain.IdentityCheck).
type Verifier struct {
	client *Client
	origin string
}

// NewVerifier returns the port on c.
func NewVerifier(c *Client) *Verifier {
	origin := HostedOrigin
	if c.base != DefaultBaseURL {
		// A base URL of one's own (a local fake in tests, or a proxy) serves
		// the hosted pages too.
		if u, err := url.Parse(c.base); err == nil {
			origin = u.Scheme + "://" + u.Host
		}
	}
	return &Verifier{client: c, origin: origin}
}

// PageOrigin is the origin the donor's browser is sent to: the flow's
// pages allow forms to lead there and nowhere else.
func (v *Verifier) PageOrigin() string { return v.origin }

// StartIdentity creates a document VerificationSession for the donor. The
// donor id is the reference; nothing personal is sent.
func (v *Verifier) StartIdentity(ctx context.Context, r domain.IdentityRequest) (domain.IdentityCheck, error) {
	s, err := v.client.CreateSession(ctx, CreateParams{
		Reference: r.DonorID, ReturnURL: r.ReturnURL, IdempotencyKey: r.IdempotencyKey,
		Metadata: map[string]string{ChurchKey: r.ChurchID, SessionKey: r.SessionID},
	})
	if err != nil {
		return domain.IdentityCheck{}, err
	}
	return check(s), nil
}

// CheckIdentity reads a VerificationSession. While it requires input and
// nothing was decided, Stripe gives a fresh url for another attempt.
func (v *Verifier) CheckIdentity(ctx context.Context, id string) (domain.IdentityCheck, error) {
	s, err := v.client.RetrieveSession(ctx, id)
	if err != nil {
		return domain.IdentityCheck{}, err
	}
	return check(s), nil
}

// CancelIdentity cancels a VerificationSession that still requires input,
// so that its url can no longer be used. Stripe refuses (ErrRefused) to
// cancel a session that is processing, verified or canceled already.
func (v *Verifier) CancelIdentity(ctx context.Context, id string) error {
	_, err := v.client.CancelSession(ctx, id, "cancel-"+id)
	return err
}

// check is a session in the service's terms. A canceled session decides
// nothing for the service, which cancels only sessions of donors it no
// longer waits for: a donor still at the step starts a new one.
func check(s Session) domain.IdentityCheck {
	c := domain.IdentityCheck{ID: s.ID}
	outcome, _ := s.Outcome()
	switch {
	case s.Status == StatusCanceled:
		c.Open = true
	case s.Status == StatusRequiresInput && outcome != Failed:
		// Not submitted yet, or a check that did not verify (a blurry
		// photo): Stripe lets the donor try again on the same session.
		c.Open, c.URL = true, s.URL
	}
	return c
}
