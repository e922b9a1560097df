package domain

import (
	"crypto/sha256"
	"encoding/json"
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

// decodePlain reads the fact as marshalPlain writes it (see plainDecoder):
// an amount ParseHundredths refuses is left to the decoder, whose
// UnmarshalJSON refuses it in the same words.
func (c *DepositCredited) decodePlain(data []byte) bool {
	trace, rest, ok := plainBytes(data, `{"trace":"`)
	if !ok {
		return false
	}
	ref, rest, ok := plainBytes(rest, `,"account_ref":"`)
	if !ok {
		return false
	}
	amount, rest, ok := plainNumber(rest, `,"amount":`)
	if !ok {
		return false
	}
	currency, rest, ok := plainBytes(rest, `,"currency":"`)
	if !ok {
		return false
	}
	bankTS, rest, ok := plainBytes(rest, `,"bank_ts":"`)
	if !ok || string(rest) != "}" {
		return false
	}
	v, ok := ParseHundredths(json.Number(amount))
	if !ok {
		return false
	}
	*c = DepositCredited{Trace: string(trace), AccountRef: string(ref), Amount: v, Currency: string(currency), BankTS: string(bankTS)}
	return true
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

// DepositBook is the aggregate id under which a partner's deposits are
// appended: one subject per partner however many deposits it receives (a
// subject per deposit kept ~170 bytes per deposit in the ledger server's
// memory for good). Serialising a partner's deposits is what makes a trace
// credit once; the decision reads the deposit's state from the projections
// (Deposit), which hold every deposit up to the book's newest event.
// Ledgers written before kept each deposit under its own id.
const DepositBook = "deposits"

// Deposit is what is known of one bank credit, identified by its trace.
type Deposit struct {
	ChurchID   string
	AccountRef string
	Amount     Hundredths
	BankTS     string
	Credited   bool
	Announced  bool
}

// DepositIDForTrace is the deposit id of a bank trace. One trace is one
// deposit of one partner, so the id is derived from it: a repeated trace
// names the same deposit (of the partner of the church it names).
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

// ReconcileCredit decides what a bank credit changes, given what is known
// of its trace's deposit: a new credit is one deposit.received that carries
// its deposit.credited (Event.Internal), so the credit and its announcement
// are one append. The same credit again changes nothing: a repeated trace
// never credits twice. A deposit credited and never announced (ledgers
// written before recorded the two apart, and could stop between them) is
// announced.
func ReconcileCredit(d Deposit, c Credit, now time.Time) (*Event, error) {
	if d.Credited {
		if d.ChurchID != c.ChurchID || d.AccountRef != c.AccountRef || d.Amount != c.Amount {
			return nil, ErrTraceReused
		}
		if d.Announced {
			return nil, nil
		}
		id := DepositIDForTrace(c.Trace)
		ev := NewEvent(c.PartnerID, DepositBook, d.ChurchID, now, &DepositReceived{
			DepositID: id, Amount: d.Amount, Currency: "USD", Trace: c.Trace, BankTS: d.BankTS,
		})
		return &ev, nil
	}
	if err := ValidateCredit(c); err != nil {
		return nil, err
	}
	id := DepositIDForTrace(c.Trace)
	credit := &DepositCredited{Trace: c.Trace, AccountRef: c.AccountRef, Amount: c.Amount, Currency: "USD", BankTS: FormatTime(c.BankTS)}
	ev := NewEvent(c.PartnerID, DepositBook, c.ChurchID, now, &DepositReceived{
		DepositID: id, Amount: credit.Amount, Currency: credit.Currency, Trace: credit.Trace, BankTS: credit.BankTS,
	})
	ev.Internal = credit
	return &ev, nil
}
