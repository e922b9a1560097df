package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// parseStripeIdentity reads a Stripe Identity webhook at /edge/kyc, in
// production from Stripe and on the sandbox from its stand-in and
// simulator, which send the same. Stripe-Signature is verified on the raw
// body with the endpoint's signing secret; a refusal is 400, as Stripe's
// examples answer. Of the verified events, only a decision about a
// verification this service started moves a donor on: the donor id is its
// reference and the church rides beside it in metadata. The rest is
// acknowledged (2xx) so that Stripe stops sending it:
//
//   - event types the service does not act on, and events whose session
//     decides nothing yet (processing; needing input before the donor
//     submitted anything);
//   - canceled sessions: the service cancels only verifications nobody
//     waits for, and a donor still at the step starts a new one;
//   - verifications without the service's reference, which another use of
//     the same Stripe account made.
func parseStripeIdentity(s *Server, r *http.Request, body []byte) (app.VendorEvent, error) {
	res, err := stripeidentity.ParseWebhook(body, r.Header.Get(stripeidentity.SignatureHeader), string(s.cfg.Vendors.KYC), time.Now())
	switch {
	case errors.Is(err, stripeidentity.ErrSignature):
		return app.VendorEvent{}, refuseSignature(http.StatusBadRequest, err)
	case errors.Is(err, stripeidentity.ErrIgnored):
		return app.VendorEvent{}, fmt.Errorf("%w: %s", errVendorIgnored, res.EventType)
	case errors.Is(err, stripeidentity.ErrInvalidEvent):
		return app.VendorEvent{}, &vendorRefusal{problem: domain.ProblemMalformedJSON, err: err}
	case err != nil:
		return app.VendorEvent{}, err
	}
	if res.Outcome == stripeidentity.Pending || res.Status == stripeidentity.StatusCanceled || (res.Reference == "" && res.Metadata[stripeidentity.ChurchKey] == "") {
		return app.VendorEvent{}, fmt.Errorf("%w: %s (%s)", errVendorIgnored, res.EventType, res.Reason)
	}
	return app.VendorEvent{ID: res.EventID, KYC: &app.KYCResult{
		DonorID: res.Reference, ChurchID: res.Metadata[stripeidentity.ChurchKey], Outcome: string(res.Outcome),
	}}, nil
}
