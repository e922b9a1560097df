package main

import (
	"flag"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/sms"
)

// twilioFlags configure the production SMS verifier (Twilio Verify). Like
// every flag they can come from the environment: GIVING_TWILIO_ACCOUNT_SID,
// GIVING_TWILIO_AUTH_TOKEN, GIVING_TWILIO_SERVICE_SID.
type twilioFlags struct {
	cfg sms.TwilioConfig
}

func (f *twilioFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cfg.AccountSID, "twilio-account-sid", "", "production: Twilio account SID (AC...)")
	fs.StringVar(&f.cfg.AuthToken, "twilio-auth-token", "", "production: Twilio auth token (prefer GIVING_TWILIO_AUTH_TOKEN)")
	fs.StringVar(&f.cfg.ServiceSID, "twilio-service-sid", "", "production: Twilio Verify service SID (VA...)")
	fs.StringVar(&f.cfg.BaseURL, "twilio-base-url", sms.TwilioBaseURL, "Twilio Verify API address")
}

// verifier is the stack's SMS verifier: the sandbox sends nothing and
// accepts 000000; production needs a complete Twilio configuration.
func (f *twilioFlags) verifier(env domain.Environment) (sms.Verifier, error) {
	if env == domain.Sandbox {
		return sms.Sandbox{}, nil
	}
	if !f.cfg.Complete() {
		return nil, usageError{"the production stack sends real verification codes: set --twilio-account-sid, --twilio-auth-token and --twilio-service-sid (or GIVING_TWILIO_ACCOUNT_SID, GIVING_TWILIO_AUTH_TOKEN, GIVING_TWILIO_SERVICE_SID)"}
	}
	return sms.NewTwilio(f.cfg)
}
