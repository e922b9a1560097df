package increasebank

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/increase"
)

// Index records which church each account number was opened for, shared by
// every instance (eventlog/accountnumbers).
type Index interface {
	Put(ctx context.Context, accountNumberID, churchID string) error
	Church(ctx context.Context, accountNumberID string) (churchID string, ok bool, err error)
}

// Live is the bank port on Increase: every church's deposit account is an
// Account Number of one Increase Account, the one the operator opened for
// the churches' gifts.
type Live struct {
	client    *increase.Client
	accountID string
	index     Index

	mu       sync.Mutex
	bankName string // of accountID, once read
}

// NewLive returns the bank port opening account numbers under the Increase
// Account accountID.
func NewLive(client *increase.Client, accountID string, index Index) *Live {
	return &Live{client: client, accountID: accountID, index: index}
}

// idempotencyKey names the one account number a church gets: Increase
// creates at most one object per key, whichever instance asks and however
// often.
func idempotencyKey(churchID string) string { return "giving-deposit-account-" + churchID }

// DepositAccount opens the church's account number (or, every time after
// the first, gets the same one back), records it in the index before
// anyone can send money to it, and returns its numbers. Increase being
// unreachable is domain.ErrUnavailable: the step asking may be retried.
func (b *Live) DepositAccount(ctx context.Context, churchID string) (app.DepositAccount, error) {
	n, err := b.client.CreateAccountNumber(ctx, increase.NewAccountNumber{AccountID: b.accountID, Name: "Church " + churchID}, idempotencyKey(churchID))
	if err != nil {
		return app.DepositAccount{}, bankErr(err)
	}
	if n.AccountID != b.accountID || n.Status != "active" {
		return app.DepositAccount{}, fmt.Errorf("increase: the deposit account number %s of church %s is %s under %s, not active under %s", n.ID, churchID, n.Status, n.AccountID, b.accountID)
	}
	if err := b.index.Put(ctx, n.ID, churchID); err != nil {
		return app.DepositAccount{}, err
	}
	name, err := b.name(ctx)
	if err != nil {
		return app.DepositAccount{}, bankErr(err)
	}
	return app.DepositAccount{RoutingNumber: n.RoutingNumber, AccountNumber: n.AccountNumber, BankName: name}, nil
}

// name is the name of the bank holding the account, read from Increase
// once.
func (b *Live) name(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bankName != "" {
		return b.bankName, nil
	}
	a, err := b.client.Account(ctx, b.accountID)
	if err != nil {
		return "", err
	}
	b.bankName = a.BankName()
	return b.bankName, nil
}

// AccountOwner is the church the index holds for the account number; its
// credits are recorded under the account number's id.
func (b *Live) AccountOwner(ctx context.Context, accountNumberID string) (app.AccountOwner, error) {
	church, ok, err := b.index.Church(ctx, accountNumberID)
	if err != nil {
		return app.AccountOwner{}, err
	}
	if !ok {
		return app.AccountOwner{}, fmt.Errorf("increase account number %s: %w", accountNumberID, app.ErrUnknownAccount)
	}
	return app.AccountOwner{ChurchID: church, AccountRef: accountNumberID}, nil
}

// bankErr marks Increase being unreachable as the service's "retry later".
func bankErr(err error) error {
	if errors.Is(err, increase.ErrUnavailable) {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	return err
}
