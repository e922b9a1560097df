package simulators

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

// Deposit is a simulated bank credit.
type Deposit struct {
	ChurchID   string
	AccountRef string
	// Amount is the partner's amount in dollars, as JSON text. It reaches
	// the transfer in cents as given (see cents), so that the edge's own
	// checks decide whether it is acceptable.
	Amount json.RawMessage
	// Trace is the bank's trace id; empty makes a new one (the caller
	// derives it from Request, see DerivedTrace, when there is one).
	Trace string
	// Request, when set, names the partner request the simulation runs for
	// (the same on every retry of it): the trace (unless given) and the
	// bank's event id derive from it, so a retried simulation sends the
	// same bank event, and the edge credits it once.
	Request string
	// BankTS is the bank's timestamp (RFC 3339); empty means now.
	BankTS string
}

// DepositResult is what the bank sent, and the edge's answer.
type DepositResult struct {
	Answer
	Trace  string
	BankTS string
}

// Deposit sends the bank's webhook for an ACH credit, as Increase sends
// it: the sandbox's Increase holds the accepted Inbound ACH Transfer (sealed
// into its id), and an inbound_ach_transfer.created Event naming it is
// signed the Standard Webhooks way with the sandbox's bank secret and
// POSTed to the edge, which fetches the transfer as it would from Increase.
func (s *Simulator) Deposit(ctx context.Context, d Deposit) (DepositResult, error) {
	eventID := "event_sandbox_" + randomHex()
	if d.Request != "" {
		eventID = "event_sandbox_" + derivedHex("bank-event", d.Request)
	}
	if d.Trace == "" {
		d.Trace = "trc_" + ksuid.New().String()
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	if d.BankTS != "" {
		t, err := time.Parse(time.RFC3339Nano, d.BankTS)
		if err != nil {
			return DepositResult{}, fmt.Errorf("simulate bank: bank timestamp %q: %w", d.BankTS, err)
		}
		at = t.UTC()
	}
	transferID, err := s.bank.TransferID(increasesandbox.Deposit{
		ChurchID: d.ChurchID, AccountRef: d.AccountRef, Trace: d.Trace, Amount: cents(d.Amount), At: at,
	})
	if err != nil {
		return DepositResult{}, fmt.Errorf("simulate bank: %w", err)
	}
	body, err := increase.MarshalEvent(increase.TransferCreated(eventID, transferID, at))
	if err != nil {
		return DepositResult{}, fmt.Errorf("simulate bank: %w", err)
	}
	answer, err := s.post(ctx, "bank", body, increase.Sign(s.secrets.Bank, eventID, body, time.Now()))
	return DepositResult{Answer: answer, Trace: d.Trace, BankTS: domain.FormatTime(at)}, err
}

// decimal is a JSON number without an exponent: what can be moved two
// places by hand.
var decimal = regexp.MustCompile(`^(-?)([0-9]+)(?:\.([0-9]+))?$`)

// cents writes a dollar amount's JSON text in cents, the unit Increase's
// transfers carry, exactly: the decimal point moves two places ("10.1" is
// "1010", "0.001" is "0.1", "-1" is "-100"). Any other text (an exponent, a
// string, true) is passed on as is, for the edge to refuse as a bank's
// malformed amount.
func cents(dollars json.RawMessage) string {
	m := decimal.FindStringSubmatch(string(dollars))
	if m == nil {
		return string(dollars)
	}
	sign, whole, frac := m[1], m[2], m[3]
	for len(frac) < 2 {
		frac += "0"
	}
	n := strings.TrimLeft(whole+frac[:2], "0")
	if n == "" {
		n = "0"
	}
	if rest := frac[2:]; rest != "" {
		n += "." + rest
	}
	return sign + n
}

// DerivedTrace is the trace a simulated deposit for request gets when none
// is given.
func DerivedTrace(request string) string { return "trc_" + derived("trace", request) }

// derived is a ksuid-shaped name of what (a trace) for request: the same
// request always gets the same one.
func derived(what, request string) string {
	sum := sha256.Sum256([]byte("simulated " + what + "\x00" + request))
	id, _ := ksuid.FromBytes(sum[:20])
	return id.String()
}

// derivedHex is derived in Increase's id alphabet.
func derivedHex(what, request string) string {
	sum := sha256.Sum256([]byte("simulated " + what + "\x00" + request))
	return hex.EncodeToString(sum[:16])
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
