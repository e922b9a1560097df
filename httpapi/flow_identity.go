package httpapi

import (
	"context"
	"strings"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The flow's identity step: a page whose one form (POST /flow/{token}/identity)
// starts the verification and answers 303 to the identity vendor's hosted
// page; the vendor sends the donor back to the flow's page, which waits
// (with wait.js) until the vendor's webhook decides.

// flowIdentity sends the donor to the identity vendor, or back to the
// flow's page (the wait) when the vendor is checking what they submitted.
func (s *Server) flowIdentity(ctx context.Context, f *flowRequest) (string, error) {
	page, err := s.app.StartIdentity(ctx, f.sess, f.now)
	f.next = page
	return "", err
}

// identityStep fills in the identity step's page for where the donor
// stands: sent to the vendor (first, or again after leaving it
// unfinished), waiting for its decision, or in review.
func (s *Server) identityStep(ctx context.Context, sess domain.Session, v *flowView) {
	v.Step = 3
	switch s.app.IdentityStage(ctx, sess) {
	case app.IdentityInReview:
		v.Page, v.Title, v.Poll = "review", "We're reviewing your details", 30
	case app.IdentityChecking:
		v.Page, v.Title, v.Poll = "checking", "Checking your identity", 5
	case app.IdentityToResume:
		v.Page, v.Title, v.Resume = "identity", "Finish checking your identity", true
	default:
		v.Page, v.Title = "identity", "Check your identity"
	}
	if v.Page == "identity" {
		v.Sandbox = s.app.Env() == domain.Sandbox
		if origin := s.app.IdentityPageOrigin(); origin != strings.TrimRight(s.app.PublicURL(), "/") {
			v.FormOrigin = origin
		}
	}
}

// allowFormsTo adds origin to where the page's forms may lead, the identity
// vendor's origin on the identity step's page alone: a form's redirect to
// the vendor is checked against form-action.
func allowFormsTo(csp, origin string) string {
	return strings.Replace(csp, "form-action 'self'", "form-action 'self' "+origin, 1)
}
