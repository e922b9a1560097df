package main

import (
	"flag"
	"strings"

	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/truv"
)

// truvFlags configure the production stack's payroll vendor, Truv. The
// sandbox runs its own stand-in and needs none of them.
type truvFlags struct {
	cfg stack.TruvConfig
}

func (f *truvFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cfg.ClientID, "truv-client-id", "", "production: Truv client id (Truv dashboard, Development → API Keys)")
	fs.StringVar(&f.cfg.Secret, "truv-secret", "", "production: Truv access secret; it also signs Truv's webhooks (prefer GIVING_TRUV_SECRET)")
	fs.StringVar(&f.cfg.BaseURL, "truv-base-url", truv.DefaultBaseURL, "Truv API address")
	fs.StringVar(&f.cfg.BridgeScriptURL, "truv-bridge-script-url", truv.BridgeScriptURL, "Truv Bridge's script, the one script the payroll widget page loads")
	fs.Func("truv-bridge-origins", "comma-separated https origins Truv Bridge may frame or call besides its script's (the widget page's policy allows them)", func(v string) error {
		f.cfg.BridgeOrigins = nil
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				f.cfg.BridgeOrigins = append(f.cfg.BridgeOrigins, o)
			}
		}
		return nil
	})
}
