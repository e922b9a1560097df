package stack

import (
	"fmt"
	"net/http"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/simulators"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// identityVendor builds the identity-verification port. Production talks
// to Stripe Identity. The sandbox runs a stand-in of it built into the
// service (simulators.IdentityStandin): its hosted page is served to
// browsers under /standin/stripe/, and it sends Stripe's own webhooks,
// signed with the sandbox's identity secret, through the production edge
// with sim. It keeps nothing between requests (its page tokens seal
// themselves with a key derived from the master key), so any instance
// serves what another issued.
func (s *Stack) identityVendor(sim *simulators.Simulator) (app.IdentityVerifier, http.Handler, error) {
	cfg := s.Config
	if cfg.Ledger.Env != domain.Sandbox {
		stripe := cfg.Stripe
		if stripe.HTTPClient == nil {
			stripe.HTTPClient = vendorClient()
		}
		client, err := stripeidentity.New(stripe)
		if err != nil {
			return nil, nil, fmt.Errorf("identity verification: %w", err)
		}
		return stripeidentity.NewVerifier(client), nil, nil
	}
	standIn, err := simulators.NewIdentityStandin(sim, cfg.PublicURL, s.Secrets.Sealer("sandbox-identity-standin"))
	if err != nil {
		return nil, nil, err
	}
	return standIn, standIn, nil
}
