package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/increase"
)

// parseBank reads a webhook from Increase, the bank holding the churches'
// deposit accounts, the way vendors/increase documents ("What to answer"):
// the Standard Webhooks signature under the event subscription's secret,
// the Event, the Inbound ACH Transfer it names fetched from BankTransfers,
// normalised into exact cents. The Event's id is the vendor event id; the
// transfer's trace is the deposit's identity, and its account number names
// the church (app resolves it).
func parseBank(s *Server, r *http.Request, body []byte) (app.VendorEvent, error) {
	receiver := increase.Receiver{Secrets: [][]byte{s.cfg.Vendors.Bank}, Transfers: s.cfg.BankTransfers}
	c, err := receiver.Receive(r.Context(), r.Header, body)
	switch {
	case errors.Is(err, increase.ErrInvalidSignature):
		return app.VendorEvent{}, refuseSignature(http.StatusUnauthorized, err)
	case errors.Is(err, increase.ErrMalformedEvent):
		return app.VendorEvent{}, &vendorRefusal{problem: domain.ProblemMalformedJSON, err: err}
	case errors.Is(err, increase.ErrIgnored):
		return app.VendorEvent{}, fmt.Errorf("%w: %w", errVendorIgnored, err)
	case errors.Is(err, increase.ErrInvalidCredit):
		// Increase sends it again and reads the same transfer: the money is
		// in the account and no church is credited until an operator acts.
		logger(r.Context()).Error().Str("vendor", "bank").Str("reason", err.Error()).Msg("a bank credit cannot be credited to any church; it needs an operator")
		return app.VendorEvent{}, invalidCredit(err)
	case err != nil:
		// Increase's API unreachable, or refusing the key: answered 503, so
		// Increase sends the event again once it works.
		return app.VendorEvent{}, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	return app.VendorEvent{ID: c.EventID, Bank: &app.BankCredit{
		Trace: c.Trace, AccountNumberID: c.AccountNumberID, AmountCents: c.AmountCents, CreditedAt: c.AcceptedAt,
	}}, nil
}

// invalidCredit is the validation problem a transfer that can never be
// credited is answered with, naming what is wrong with it (a simulated
// deposit's answer carries it back to the partner).
func invalidCredit(err error) error {
	var v domain.Validation
	switch {
	case errors.Is(err, increase.ErrFractionalAmount), errors.Is(err, increase.ErrAmountNotPositive), errors.Is(err, increase.ErrMalformedAmount):
		v.Add("amount", "must be exact cents above 0")
	case errors.Is(err, increase.ErrCurrency):
		v.Add("currency", "must be USD")
	default:
		v.Add("transfer", "is not an accepted ACH credit the service can read")
	}
	return v.Err()
}
