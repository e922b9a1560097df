package app

import (
	"context"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
)

// BankCredit is the bank announcing an ACH credit it accepted into one of
// its account numbers, normalised by the edge from the bank's own format:
// exact cents, the bank's trace, and the bank's id of the account number,
// which the Bank port resolves to a church.
type BankCredit struct {
	Trace           string
	AccountNumberID string
	AmountCents     int64
	// CreditedAt is when the bank accepted the credit and the money moved.
	CreditedAt time.Time
}

// parseCredit reconciles a bank credit to a church: the account number it
// arrived on names the church (and the account reference it is recorded
// under), the church names the partner. A credit to an account number that
// is no church's is refused, and logged for an operator: the money is in
// the bank, and no church was credited.
func (s *Service) parseCredit(ctx context.Context, d BankCredit) (domain.Credit, error) {
	owner, err := s.bank.AccountOwner(ctx, d.AccountNumberID)
	if errors.Is(err, ErrUnknownAccount) {
		s.log.Error().Str("account_number_id", d.AccountNumberID).Msg("a bank credit arrived on an account number that is no church's; the money is at the bank and no church was credited")
		return domain.Credit{}, unknownReference("account_number_id %q is no church's deposit account.", d.AccountNumberID)
	}
	if err != nil {
		return domain.Credit{}, err
	}
	c := domain.Credit{
		Trace: d.Trace, AccountRef: owner.AccountRef, ChurchID: owner.ChurchID,
		Amount: domain.Hundredths(d.AmountCents), BankTS: d.CreditedAt,
	}
	if err := domain.ValidateCredit(c); err != nil {
		return c, err
	}
	partner, err := s.churchOwner(owner.ChurchID)
	c.PartnerID = partner
	return c, err
}

// The longest trace and account reference a credit may carry, and the
// longest amount text a simulated deposit may send: the sandbox's bank
// carries them in its transfer's id, which has a bound.
const (
	maxCreditField    = 64
	maxSimulatedMoney = 32
)

// checkSimulatedDeposit refuses, before anything is sent, a simulated
// deposit too long for any bank to carry. Everything shorter reaches the
// edge, whose checks answer for it.
func checkSimulatedDeposit(d SimulatedDeposit) error {
	var v domain.Validation
	if len(d.Trace) > maxCreditField {
		v.Add("trace", "must be at most %d characters", maxCreditField)
	}
	if len(d.AccountRef) > maxCreditField {
		v.Add("account_ref", "must be at most %d characters", maxCreditField)
	}
	if len(d.Amount) > maxSimulatedMoney {
		v.Add("amount", "must be a number above 0 with at most two decimals")
	}
	return v.Err()
}
