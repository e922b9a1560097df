package increasebank

import (
	"context"
	"fmt"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

// Sandbox is the bank port on the sandbox's built-in Increase: deposit
// accounts derived from the church, account numbers that name their church
// and account reference.
type Sandbox struct {
	bank *increasesandbox.Sandbox
}

// NewSandbox returns the bank port on the sandbox's Increase.
func NewSandbox(bank *increasesandbox.Sandbox) *Sandbox { return &Sandbox{bank: bank} }

// DepositAccount is the church's derived sandbox account.
func (b *Sandbox) DepositAccount(_ context.Context, churchID string) (app.DepositAccount, error) {
	routing, number := b.bank.DepositAccount(churchID)
	return app.DepositAccount{RoutingNumber: routing, AccountNumber: number, BankName: increasesandbox.BankName}, nil
}

// AccountOwner reads the church and the account reference out of a sandbox
// account number id.
func (b *Sandbox) AccountOwner(_ context.Context, accountNumberID string) (app.AccountOwner, error) {
	church, ref, err := b.bank.Owner(accountNumberID)
	if err != nil {
		return app.AccountOwner{}, fmt.Errorf("%s: %w: %w", accountNumberID, err, app.ErrUnknownAccount)
	}
	return app.AccountOwner{ChurchID: church, AccountRef: ref}, nil
}
