package app

import (
	"context"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/reservations"
	"github.com/partnergiving/giving/eventlog/vault"
)

// The small interfaces the use cases need of the stores beside them, which
// the wiring hands New (eventlog.Ledger, vault.Vault, idempotency.Store
// and the dispatcher implement them), so a reader sees here all that app
// asks of each, and a test may stand in for one.

// Ledger is what the use cases need of the ledger: run a command, read
// what is stored, take an aggregate's turn, and know whether it can store
// writes now.
type Ledger interface {
	Execute(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error)
	History(ctx context.Context, partner, aggregate string) (eventlog.History, error)
	Get(ctx context.Context, seq uint64) (eventlog.Record, error)
	Read(ctx context.Context, filter string, after uint64, max int) ([]eventlog.Record, uint64, error)
	Scan(ctx context.Context, filter string, after uint64, max int) ([]eventlog.Record, uint64, error)
	ScanSince(ctx context.Context, filter string, since time.Time, max int) ([]eventlog.Record, uint64, error)
	LastOf(ctx context.Context, filter string) (uint64, error)
	LastSeq(ctx context.Context) (uint64, error)
	Subjects() eventlog.Subjects
	Turn(ctx context.Context, key string) (release func(), err error)
	Writable() error
	DedupWindow() time.Duration
}

// Vault keeps donor phones sealed: the donor id a phone gets, sealing one
// for a session's event, reading one back, and sweeping what nothing
// refers to.
type Vault interface {
	DonorID(partnerID, phone string) string
	SealPhone(ctx context.Context, donorID, phone string) (sealed domain.SealedPhone, storeBy time.Time, err error)
	Phone(ctx context.Context, donorID string, sealed *domain.SealedPhone) (string, error)
	Sweep(ctx context.Context, grace time.Duration, refs vault.Refs) error
}

// Idempotency keeps the Idempotency-Key records: Begin claims a key (or
// says why the request must not run), Complete stores the answer under it,
// Release lets it run again.
type Idempotency interface {
	Begin(ctx context.Context, scope, key, fingerprint string) (Begun, error)
	Complete(ctx context.Context, c *Claim, fingerprint string, status int, body []byte) error
	Release(ctx context.Context, c *Claim, fingerprint string) error
}

// Reservations keep the values that must stay unique (a partner's
// external ids) reserved for the command about to store one
// (reservations.Store implements it; externalids.go says how the use
// cases keep the rule with it): Reserve reserves a key for a holder or
// answers whose it is, TakeOver moves a stale one, Held reads one and
// Release removes one once the value is free again.
type Reservations interface {
	Reserve(ctx context.Context, key, holder string) (reservations.Reservation, error)
	TakeOver(ctx context.Context, r reservations.Reservation, holder string) (reservations.Reservation, bool, error)
	Held(ctx context.Context, key string) (reservations.Reservation, bool, error)
	Release(ctx context.Context, r reservations.Reservation) error
}

// DepositAccount is the bank account a church's gifts are deposited into:
// what a payroll provider needs to send a donor's allocation there. It is
// bank data: never shown to partners, never logged.
type DepositAccount struct {
	RoutingNumber string
	AccountNumber string
	BankName      string
}

// Bank is the bank that holds the churches' deposit accounts.
type Bank interface {
	// DepositAccount is the account a church's gifts go to, opened at the
	// bank on first use: any instance may ask, any number of times, and
	// the church gets one account.
	DepositAccount(ctx context.Context, churchID string) (DepositAccount, error)
	// AccountOwner is whose deposit account the bank's id of an account
	// number names, for a credit the bank announced on it;
	// ErrUnknownAccount when it names none.
	AccountOwner(ctx context.Context, accountNumberID string) (AccountOwner, error)
}

// AccountOwner is the church an account number belongs to, and the
// account reference its credits are recorded under (deposit.credited's
// account_ref, which partners never see).
type AccountOwner struct {
	ChurchID   string
	AccountRef string
}

// ErrUnknownAccount is an account number the bank credited that no church
// was given.
var ErrUnknownAccount = errors.New("the account number is no church's deposit account")
