package httpapi

import (
	"strings"

	"github.com/partnergiving/giving/app"
)

// The flow's identity step: a page whose one form (POST /flow/{token}/identity)
// starts the verification and answers 303 to the identity vendor's hosted
// page (app.FormIdentity); the vendor sends the donor back to the flow's
// page, which waits (with wait.js) until the vendor's webhook decides.

// identityView fills in the identity step's page for where the donor
// stands: sent to the vendor (first, or again after leaving it
// unfinished), waiting for its decision, or in review.
func identityView(p app.FlowPage, v *flowView) {
	v.Step = 3
	switch p.Identity {
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
		v.FormOrigin = p.IdentityOrigin
	}
}

// allowFormsTo adds origin to where the page's forms may lead, the identity
// vendor's origin on the identity step's page alone: a form's redirect to
// the vendor is checked against form-action.
func allowFormsTo(csp, origin string) string {
	return strings.Replace(csp, "form-action 'self'", "form-action 'self' "+origin, 1)
}
