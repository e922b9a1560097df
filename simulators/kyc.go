package simulators

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// KYC sends the identity vendor's decision about a donor: the webhook
// Stripe Identity sends when a VerificationSession is verified (passed) or
// needs input again after a check did not verify (review) or the person
// declined (failed), with the donor and church as the service's
// verifications carry them in metadata.
func (s *Simulator) KYC(ctx context.Context, churchID, donorID, outcome string) (Answer, error) {
	typ, lastErr, err := stripeidentity.OutcomeEvent(stripeidentity.Outcome(outcome))
	if err != nil {
		return Answer{}, fmt.Errorf("simulate kyc: %w", err)
	}
	return s.identityEvent(ctx, stripeidentity.EventParams{
		Type: typ, LastError: lastErr,
		Metadata: map[string]string{stripeidentity.ReferenceKey: donorID, stripeidentity.ChurchKey: churchID},
	})
}

// identityEvent renders one VerificationSession event as Stripe does, signs
// it with the sandbox's identity webhook secret the way Stripe signs
// (Stripe-Signature), and posts it to the edge's identity route.
func (s *Simulator) identityEvent(ctx context.Context, p stripeidentity.EventParams) (Answer, error) {
	now := time.Now()
	p.Created = now
	body, err := stripeidentity.BuildEvent(p)
	if err != nil {
		return Answer{}, fmt.Errorf("simulate kyc: %w", err)
	}
	h := http.Header{}
	h.Set(stripeidentity.SignatureHeader, stripeidentity.Sign(string(s.secrets.KYC), body, now))
	return s.post(ctx, "kyc", body, h)
}

// kycOutcomes are the outcomes the identity simulations can send.
var kycOutcomes = []string{domain.KYCPassed, domain.KYCReview, domain.KYCFailed}
