package increase

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Credit is an ACH credit that Increase accepted into one of the account's
// account numbers, in terms that do not depend on Increase. It is what the
// service reconciles: the trace is the deposit's identity, the account number
// id says which church's account received it.
type Credit struct {
	// EventID is the Increase Event that announced the transfer. Two events
	// (created, then updated) can announce the same accepted transfer, so it
	// identifies a delivery, not a deposit.
	EventID string
	// TransferID is the Inbound ACH Transfer's id, unique at Increase.
	TransferID string
	// TransactionID is the Increase Transaction the acceptance created.
	TransactionID string
	// Trace is the ACH trace number the originating bank set: 15 digits at
	// Increase. Increase
	// documents that trace numbers are not unique across originators: with the
	// originator's routing number and the effective date it identifies the
	// entry, and it is what an ACH return refers to.
	Trace string
	// AmountCents is the amount in exact integer cents, above zero.
	AmountCents int64
	// Currency is always USD: Increase's ACH amounts are USD cents.
	Currency string
	// AccountID is the Increase Account holding the receiving account number.
	AccountID string
	// AccountNumberID is the Increase Account Number the transfer was sent
	// to: give each church its own account number and this names the church.
	AccountNumberID string
	// OriginatorRoutingNumber is the ABA routing number of the sending bank.
	// The receiving routing number is not on the transfer (it belongs to the
	// Account Number object), and the service does not need it.
	OriginatorRoutingNumber string
	// OriginatorName is the originator's company name, e.g. the payroll
	// provider, and OriginatorCompanyID its ACH company id.
	OriginatorName      string
	OriginatorCompanyID string
	// EntryDescription is the originator's company entry description.
	EntryDescription string
	// EffectiveDate is the settlement date the sending bank asked for, a civil
	// date (YYYY-MM-DD) without a time zone.
	EffectiveDate string
	// ReceivedAt is when Increase received the transfer; AcceptedAt when it
	// accepted it and the money moved.
	ReceivedAt time.Time
	AcceptedAt time.Time
}

// ErrIgnored is an authentic event that announces no credit: another
// category, a debit, or a transfer not (or no longer) accepted. Increase
// needs a 2xx for it all the same, or it sends it again.
var ErrIgnored = errors.New("increase: event announces no credit")

// The reasons an event is ignored, each an ErrIgnored.
var (
	ErrCategoryIgnored = fmt.Errorf("%w: event category is not an inbound ACH transfer", ErrIgnored)
	ErrNotCredit       = fmt.Errorf("%w: transfer is a debit", ErrIgnored)
	ErrNotAccepted     = fmt.Errorf("%w: transfer is not accepted", ErrIgnored)
)

// ErrInvalidCredit is a transfer Increase describes in a way the service
// cannot credit: the same object will read the same on every retry, so it is
// refused for good and logged for an operator.
var ErrInvalidCredit = errors.New("increase: transfer cannot be credited")

// The reasons a transfer cannot be credited, each an ErrInvalidCredit.
var (
	ErrMalformedAmount   = fmt.Errorf("%w: amount is not an integer number of cents", ErrInvalidCredit)
	ErrFractionalAmount  = fmt.Errorf("%w: amount has a fraction of a cent", ErrInvalidCredit)
	ErrAmountNotPositive = fmt.Errorf("%w: amount is not above zero", ErrInvalidCredit)
	ErrCurrency          = fmt.Errorf("%w: currency is not USD", ErrInvalidCredit)
	ErrMalformedTransfer = fmt.Errorf("%w: transfer object is malformed", ErrInvalidCredit)
)

// USD is the only currency the service credits.
const USD = "USD"

// traceForm is what the receiver holds a trace number to: Increase's are
// the 15 digits of an ACH trace, and the sandbox's stand-in of Increase
// carries the trace a partner chose for a simulated deposit (any 1 to 64
// visible characters, as the service's own deposit rules allow), so only
// what keeps a trace safe in a log and a ledger is checked here; the
// service's rules decide the rest.
var traceForm = regexp.MustCompile(`^[!-~]{1,64}$`)

// dateForm is how Increase writes a date without a time.
const dateForm = time.DateOnly

// ParseCents reads an amount in integer cents from its JSON text. Increase
// sends amounts as integers of the minor unit; anything else (a decimal
// point, an exponent, a sign on zero) is refused rather than rounded. The
// errors never repeat the amount: they end up in logs, which carry no
// amounts a donor's pay could be read from.
func ParseCents(n json.Number) (int64, error) {
	s := string(n)
	switch {
	case s == "":
		return 0, ErrMalformedAmount
	case strings.ContainsAny(s, "eE"):
		return 0, fmt.Errorf("%w: it has an exponent", ErrMalformedAmount)
	case strings.Contains(s, "."):
		return 0, ErrFractionalAmount
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrMalformedAmount
	}
	if v <= 0 || strings.HasPrefix(s, "-") {
		return 0, ErrAmountNotPositive
	}
	if strings.HasPrefix(s, "+") || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: it is not in canonical form", ErrMalformedAmount)
	}
	return v, nil
}

// Normalise turns the transfer an event announced into a Credit, or says why
// it is none: ErrIgnored when there is nothing to credit (yet), ErrInvalidCredit
// when the transfer can never be credited.
func Normalise(eventID string, t InboundACHTransfer) (Credit, error) {
	if t.Type != objectTypeInboundACHTransfer || !idForm.MatchString(t.ID) {
		return Credit{}, fmt.Errorf("%w: type %q, id %q", ErrMalformedTransfer, t.Type, t.ID)
	}
	if t.Direction != DirectionCredit {
		return Credit{}, fmt.Errorf("%w: direction %q", ErrNotCredit, t.Direction)
	}
	if t.Status != StatusAccepted {
		return Credit{}, fmt.Errorf("%w: status %q", ErrNotAccepted, t.Status)
	}
	cents, err := ParseCents(t.Amount)
	if err != nil {
		return Credit{}, err
	}
	if t.InternationalAddenda != nil && t.InternationalAddenda.DestinationCurrencyCode != USD {
		return Credit{}, fmt.Errorf("%w: destination currency %q", ErrCurrency, t.InternationalAddenda.DestinationCurrencyCode)
	}
	if err := checkTransfer(t); err != nil {
		return Credit{}, err
	}
	return Credit{
		EventID:                 eventID,
		TransferID:              t.ID,
		TransactionID:           t.Acceptance.TransactionID,
		Trace:                   t.TraceNumber,
		AmountCents:             cents,
		Currency:                USD,
		AccountID:               t.AccountID,
		AccountNumberID:         t.AccountNumberID,
		OriginatorRoutingNumber: t.OriginatorRoutingNumber,
		OriginatorName:          t.OriginatorCompanyName,
		OriginatorCompanyID:     t.OriginatorCompanyID,
		EntryDescription:        t.OriginatorCompanyEntryDescription,
		EffectiveDate:           t.EffectiveDate,
		ReceivedAt:              t.CreatedAt.UTC(),
		AcceptedAt:              t.Acceptance.AcceptedAt.UTC(),
	}, nil
}

// checkTransfer holds an accepted credit to the fields the service relies on.
func checkTransfer(t InboundACHTransfer) error {
	var bad []string
	if t.Acceptance == nil || !idForm.MatchString(t.Acceptance.TransactionID) || t.Acceptance.AcceptedAt.IsZero() {
		bad = append(bad, "acceptance")
	}
	if !traceForm.MatchString(t.TraceNumber) {
		bad = append(bad, "trace_number")
	}
	if !idForm.MatchString(t.AccountNumberID) {
		bad = append(bad, "account_number_id")
	}
	if !idForm.MatchString(t.AccountID) {
		bad = append(bad, "account_id")
	}
	if _, err := time.Parse(dateForm, t.EffectiveDate); err != nil {
		bad = append(bad, "effective_date")
	}
	if t.CreatedAt.IsZero() {
		bad = append(bad, "created_at")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrMalformedTransfer, strings.Join(bad, ", "))
	}
	return nil
}

// AcceptedTransfer is the Inbound ACH Transfer Increase serves for c once
// it accepted it: Normalise read backwards. The sandbox's Increase and the
// fake (increasefake) build the transfers they serve with it. Fields c
// leaves empty take the values Increase's own simulation would give: the
// originator of the documented example, acceptance at receipt, settlement
// the same day. Currency is not written: Increase's ACH credits are USD.
//
// Nothing is checked: a stand-in of Increase serves what it was asked for,
// so that Normalise, not the builder, refuses what a bank never sends.
func AcceptedTransfer(c Credit) InboundACHTransfer {
	received, accepted := c.ReceivedAt.UTC(), c.AcceptedAt.UTC()
	if accepted.IsZero() {
		accepted = received
	}
	txn := cmp.Or(c.TransactionID, "transaction_"+strings.TrimPrefix(c.TransferID, objectTypeInboundACHTransfer+"_"))
	return InboundACHTransfer{
		ID:                                c.TransferID,
		Acceptance:                        &Acceptance{AcceptedAt: accepted, TransactionID: txn},
		AccountID:                         c.AccountID,
		AccountNumberID:                   c.AccountNumberID,
		Amount:                            json.Number(strconv.FormatInt(c.AmountCents, 10)),
		AutomaticallyResolvesAt:           received.Add(time.Hour),
		CreatedAt:                         received,
		Direction:                         DirectionCredit,
		EffectiveDate:                     cmp.Or(c.EffectiveDate, received.Format(dateForm)),
		OriginatorCompanyEntryDescription: cmp.Or(c.EntryDescription, "PAYROLL"),
		OriginatorCompanyID:               cmp.Or(c.OriginatorCompanyID, "0987654321"),
		OriginatorCompanyName:             cmp.Or(c.OriginatorName, "PAYROLL COMPANY"),
		OriginatorRoutingNumber:           cmp.Or(c.OriginatorRoutingNumber, "101050001"),
		Settlement:                        Settlement{SettledAt: received, SettlementSchedule: "same_day"},
		StandardEntryClassCode:            "prearranged_payments_and_deposit",
		Status:                            StatusAccepted,
		TraceNumber:                       c.Trace,
		Type:                              objectTypeInboundACHTransfer,
	}
}
