package main

import (
	"flag"

	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/increase"
)

// increaseFlags configure the production bank, Increase: the API key and
// the Account the churches' account numbers are opened under, and the
// shared secret of the event subscription that sends /edge/bank its
// webhooks. The sandbox runs its own Increase and needs none of them.
type increaseFlags struct {
	cfg           stack.IncreaseConfig
	webhookSecret string
}

func (f *increaseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cfg.APIKey, "increase-api-key", "", "production: Increase API key (prefer GIVING_INCREASE_API_KEY)")
	fs.StringVar(&f.webhookSecret, "increase-webhook-secret", "", "Increase event subscription's shared secret, which signs the webhooks to /edge/bank (sandbox: derived when empty)")
	fs.StringVar(&f.cfg.BaseURL, "increase-base-url", increase.ProductionBaseURL, "Increase API address")
	fs.StringVar(&f.cfg.AccountID, "increase-account-id", "", "production: the Increase account (account_...) the churches' deposit account numbers are opened under")
}

// need names the settings production cannot run without.
func (f *increaseFlags) need(need func(flag, value string)) {
	need("increase-api-key", f.cfg.APIKey)
	need("increase-webhook-secret", f.webhookSecret)
	need("increase-base-url", f.cfg.BaseURL)
	need("increase-account-id", f.cfg.AccountID)
}
