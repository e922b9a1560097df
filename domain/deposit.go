package domain

import (
	"crypto/sha256"
	"regexp"
	"time"

	"github.com/segmentio/ksuid"
)

// DepositCredited is internal: the bank credited one of a church's
// accounts. It holds the account reference, which partners never see.
type DepositCredited struct {
	Trace      string     `json:"trace"`
	AccountRef string     `json:"account_ref"`
	Amount     Hundredths `json:"amount"`
	Currency   string     `json:"currency"`
	BankTS     string     `json:"bank_ts"`
}

// DepositReceived is the public deposit.received event: a bank credit for
// one of the partner's churches was reconciled. It carries no bank account
// data.
type DepositReceived struct {
	DepositID string     `json:"deposit_id" jsonschema:"pattern=^dep_[0-9A-Za-z]{27}$"`
	Amount    Hundredths `json:"amount" jsonschema:"exclusiveMinimum=0" jsonschema_description:"Dollars, exact cents, always written with two decimals (125.50)."`
	Currency  string     `json:"currency" jsonschema:"pattern=^[A-Z]{3}$,example=USD"`
	Trace     string     `json:"trace" jsonschema_description:"The bank's trace id of the credit."`
	BankTS    string     `json:"bank_ts" jsonschema:"pattern=^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$" jsonschema_description:"When the bank recorded the credit (ISO 8601 UTC, three fraction digits). Carries no bank account data."`
}

func (*DepositCredited) EventType() string { return "deposit.credited" }
func (*DepositReceived) EventType() string { return "deposit.received" }

func init() {
	register[DepositCredited](false, "The bank credited a church's account.")
	register[DepositReceived](true, "A bank credit for one of the partner's churches arrived and was reconciled.")
	registerCarrying("deposit.received", "deposit.credited")
}

// Deposit is the deposit aggregate: one bank credit, identified by its trace.
type Deposit struct {
	ID        string          `json:"id"`
	ChurchID  string          `json:"church_id"`
	Credit    DepositCredited `json:"credit"`
	Credited  bool            `json:"credited"`
	Announced bool            `json:"announced"`
}

// Apply folds one of the deposit's events into its state.
func (d *Deposit) Apply(e Event) {
	switch p := e.Payload.(type) {
	case *DepositCredited:
		d.ID, d.ChurchID, d.Credit, d.Credited = e.AggregateID, e.ChurchID, *p, true
	case *DepositReceived:
		d.Announced = true
	}
}

// DepositIDForTrace is the deposit id of a bank trace. One trace is one
// deposit of one partner, so the id is derived from it: a repeated trace
// lands on the same aggregate (under the partner of the church it names) and
// cannot credit twice.
func DepositIDForTrace(trace string) string {
	sum := sha256.Sum256([]byte("trace\x00" + trace))
	id, _ := ksuid.FromBytes(sum[:20])
	return PrefixDeposit + id.String()
}

// MaxCredit bounds one bank credit: $99,999,999.99, the largest amount an
// ACH entry's ten-digit amount field can carry.
const MaxCredit Hundredths = 99_999_999_99

var (
	traceForm      = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	accountRefForm = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// Credit is a bank credit to reconcile.
type Credit struct {
	PartnerID  string
	ChurchID   string
	Trace      string
	AccountRef string
	Amount     Hundredths
	BankTS     time.Time
}

// ValidateCredit checks a credit's fields.
func ValidateCredit(c Credit) error {
	var v Validation
	if !traceForm.MatchString(c.Trace) {
		v.Add("trace", "must be 1 to 64 letters, digits or _.:-")
	}
	if !accountRefForm.MatchString(c.AccountRef) {
		v.Add("account_ref", "must be 1 to 64 letters, digits or _.:-")
	}
	if c.Amount <= 0 || c.Amount > MaxCredit {
		v.Add("amount", "must be above 0 and at most %s, in exact cents", MaxCredit)
	}
	return v.Err()
}

// ErrTraceReused means a trace already credited arrived again with another
// church, account or amount: not a repeat of the same credit, and never
// credited.
var ErrTraceReused = ProblemTraceConflict.New("This trace was already credited with a different church, account or amount.")

// CreditDeposit decides recording a bank credit: one deposit.received that
// carries its deposit.credited (Event.Internal), so the credit and its
// announcement are one append. The same credit again changes nothing: a
// repeated trace never credits twice. (Ledgers written before kept the two
// as separate events; a deposit credited there but never announced is
// announced by AnnounceDeposit.)
func CreditDeposit(d *Deposit, c Credit, now time.Time) (*Event, error) {
	if d.Credited {
		if d.ChurchID != c.ChurchID || d.Credit.AccountRef != c.AccountRef || d.Credit.Amount != c.Amount {
			return nil, ErrTraceReused
		}
		return nil, nil
	}
	if err := ValidateCredit(c); err != nil {
		return nil, err
	}
	id := DepositIDForTrace(c.Trace)
	credit := &DepositCredited{Trace: c.Trace, AccountRef: c.AccountRef, Amount: c.Amount, Currency: "USD", BankTS: FormatTime(c.BankTS)}
	ev := NewEvent(c.PartnerID, id, c.ChurchID, now, &DepositReceived{
		DepositID: id, Amount: credit.Amount, Currency: credit.Currency, Trace: credit.Trace, BankTS: credit.BankTS,
	})
	ev.Internal = credit
	return &ev, nil
}

// AnnounceDeposit decides telling the partner about a credited deposit, once:
// only a deposit a ledger written before CreditDeposit carried the credit
// in its announcement can be credited and not announced.
func AnnounceDeposit(d *Deposit, partnerID string, now time.Time) *Event {
	if !d.Credited || d.Announced {
		return nil
	}
	ev := NewEvent(partnerID, d.ID, d.ChurchID, now, &DepositReceived{
		DepositID: d.ID, Amount: d.Credit.Amount, Currency: d.Credit.Currency, Trace: d.Credit.Trace, BankTS: d.Credit.BankTS,
	})
	return &ev
}
