package main

import (
	"flag"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// stripeFlags configure the production identity vendor (Stripe Identity):
// GIVING_STRIPE_SECRET_KEY, GIVING_STRIPE_WEBHOOK_SECRET and
// GIVING_STRIPE_BASE_URL. The sandbox runs its built-in stand-in of it
// and needs none of them.
type stripeFlags struct {
	cfg           stripeidentity.Config
	webhookSecret string
}

func (f *stripeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cfg.SecretKey, "stripe-secret-key", "", "production: Stripe secret or restricted key (sk_live_..., rk_live_...) for Stripe Identity's VerificationSessions (prefer GIVING_STRIPE_SECRET_KEY)")
	fs.StringVar(&f.webhookSecret, "stripe-webhook-secret", "", "production: signing secret (whsec_...) of the Stripe webhook endpoint <public URL>/edge/kyc (sandbox: derived when empty)")
	fs.StringVar(&f.cfg.BaseURL, "stripe-base-url", stripeidentity.DefaultBaseURL, "Stripe API address")
}
