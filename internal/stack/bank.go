package stack

import (
	"context"
	"errors"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/accountnumbers"
	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasebank"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

// IncreaseConfig is the production bank: Increase's API, reached with a
// secret API key, and the Account whose account numbers the churches'
// deposit accounts are. Its webhook secret is Config.Vendors.Bank.
type IncreaseConfig struct {
	APIKey string
	// BaseURL is Increase's API; empty means increase.ProductionBaseURL.
	BaseURL   string
	AccountID string
}

// bank is the bank port and the source of the transfers the bank edge
// reads: Increase in production; on the sandbox its own Increase, which
// the simulators also get (sandbox).
type bank struct {
	port      app.Bank
	transfers increase.Transfers
	sandbox   *increasesandbox.Sandbox
}

// openBank builds the stack's bank for its environment.
func (s *Stack) openBank(ctx context.Context) (bank, error) {
	if s.Config.Ledger.Env == domain.Sandbox {
		sb := increasesandbox.New(s.Secrets)
		return bank{port: increasebank.NewSandbox(sb), transfers: sb, sandbox: sb}, nil
	}
	c := s.Config.Increase
	if c.BaseURL == "" {
		c.BaseURL = increase.ProductionBaseURL
	}
	if c.AccountID == "" {
		return bank{}, errors.New("production needs the Increase account the churches' account numbers are opened under: --increase-account-id")
	}
	client, err := increase.NewClient(c.BaseURL, c.APIKey, vendorClient())
	if err != nil {
		return bank{}, err
	}
	index, err := accountnumbers.Open(ctx, s.Ledger)
	if err != nil {
		return bank{}, err
	}
	return bank{port: increasebank.NewLive(client, c.AccountID, index), transfers: client}, nil
}
