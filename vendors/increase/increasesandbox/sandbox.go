package increasesandbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/partnergiving/giving/secrets"
	"github.com/partnergiving/giving/vendors/increase"
)

// Sandbox is the sandbox's Increase. Its zero value is not usable; call
// New.
type Sandbox struct {
	seal *secrets.Sealer
	key  []byte
}

// New returns the sandbox's Increase, keyed from the stack's secrets: every
// instance with the same master key opens the same transfers.
func New(s *secrets.Secrets) *Sandbox {
	return &Sandbox{seal: s.Sealer("sandbox-bank/transfers"), key: s.Key("sandbox-bank/accounts")}
}

// The ids' prefixes: Increase's object type, then "sandbox" so that no one
// takes one for Increase's own.
const (
	transferPrefix      = "inbound_ach_transfer_sandbox_"
	accountNumberPrefix = "account_number_sandbox_"
	// AccountID is the sandbox's one Account, which holds every church's
	// account numbers.
	AccountID = "account_sandbox"
	// RoutingNumber is the routing number of Increase's documented example
	// Account Number.
	RoutingNumber = "101050001"
	// BankName is the bank the sandbox's deposit accounts are at: none.
	BankName = "Sandbox Bank"
)

// ids are lower-case base32 without padding: Increase's id alphabet.
var ids = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Deposit is a simulated credit, as the partner asked for it.
type Deposit struct {
	ChurchID   string
	AccountRef string
	Trace      string
	// Amount is the amount in cents as the transfer's JSON would write it.
	// The simulator passes what the partner asked for through, so that the
	// edge's checks, not the simulator, refuse what a bank never sends.
	Amount string
	// At is when the sandbox's bank received and accepted the transfer, to
	// the millisecond.
	At time.Time
}

// MaxField bounds each of a deposit's strings, so that a transfer id stays
// within what the edge reads as an Increase id: a trace or an account
// reference is at most 64 characters in the service's rules, an amount far
// fewer.
const MaxField = 64

// ErrFieldTooLong is a deposit with a string over MaxField bytes.
var ErrFieldTooLong = fmt.Errorf("a simulated deposit's church, account reference, trace and amount are at most %d bytes each", MaxField)

// TransferID seals d into the id of the Inbound ACH Transfer that carries
// it.
func (b *Sandbox) TransferID(d Deposit) (string, error) {
	var buf []byte
	for _, s := range []string{d.ChurchID, d.AccountRef, d.Trace, d.Amount} {
		if len(s) > MaxField {
			return "", ErrFieldTooLong
		}
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	buf = binary.AppendVarint(buf, d.At.UnixMilli())
	return transferPrefix + ids.EncodeToString(b.seal.Seal(buf, []byte(transferPrefix))), nil
}

// ErrUnknownTransfer is an id the sandbox did not seal: Increase's 404.
var ErrUnknownTransfer = fmt.Errorf("%w: no sandbox transfer has this id", increase.ErrRejected)

// deposit opens a transfer id.
func (b *Sandbox) deposit(id string) (Deposit, error) {
	enc, ok := strings.CutPrefix(id, transferPrefix)
	if !ok {
		return Deposit{}, ErrUnknownTransfer
	}
	sealed, err := ids.DecodeString(enc)
	if err != nil {
		return Deposit{}, ErrUnknownTransfer
	}
	buf, err := b.seal.Open(sealed, []byte(transferPrefix))
	if err != nil {
		return Deposit{}, ErrUnknownTransfer
	}
	var fields [4]string
	for i := range fields {
		n, size := binary.Uvarint(buf)
		if size <= 0 || uint64(len(buf)-size) < n {
			return Deposit{}, ErrUnknownTransfer
		}
		fields[i], buf = string(buf[size:size+int(n)]), buf[size+int(n):]
	}
	ms, size := binary.Varint(buf)
	if size <= 0 || size != len(buf) {
		return Deposit{}, ErrUnknownTransfer
	}
	return Deposit{ChurchID: fields[0], AccountRef: fields[1], Trace: fields[2], Amount: fields[3], At: time.UnixMilli(ms).UTC()}, nil
}

// InboundACHTransfer is the transfer a sandbox transfer id seals, as
// Increase would serve it once accepted: what the edge fetches.
func (b *Sandbox) InboundACHTransfer(_ context.Context, id string) (increase.InboundACHTransfer, error) {
	d, err := b.deposit(id)
	if err != nil {
		return increase.InboundACHTransfer{}, err
	}
	t := increase.AcceptedTransfer(increase.Credit{
		TransferID:              id,
		TransactionID:           "transaction_sandbox_" + b.digest("transaction", id),
		Trace:                   d.Trace,
		AccountID:               AccountID,
		AccountNumberID:         b.AccountNumberID(d.ChurchID, d.AccountRef),
		OriginatorRoutingNumber: RoutingNumber,
		OriginatorName:          "SANDBOX PAYROLL",
		ReceivedAt:              d.At,
	})
	// The amount is the partner's, as asked: the edge's checks, not the
	// sandbox, refuse what a bank never sends.
	t.Amount = json.Number(d.Amount)
	return t, nil
}

// AccountNumberID is the id of the church's sandbox account number the
// partner calls accountRef.
func (b *Sandbox) AccountNumberID(churchID, accountRef string) string {
	return accountNumberPrefix + ids.EncodeToString([]byte(churchID+"\x00"+accountRef))
}

// ErrNotSandboxAccount is an account number id AccountNumberID did not
// make.
var ErrNotSandboxAccount = errors.New("not a sandbox account number id")

// Owner is the church and the account reference an account number id
// names.
func (b *Sandbox) Owner(accountNumberID string) (churchID, accountRef string, err error) {
	enc, ok := strings.CutPrefix(accountNumberID, accountNumberPrefix)
	if !ok {
		return "", "", ErrNotSandboxAccount
	}
	raw, err := ids.DecodeString(enc)
	if err != nil {
		return "", "", ErrNotSandboxAccount
	}
	churchID, accountRef, ok = strings.Cut(string(raw), "\x00")
	if !ok {
		return "", "", ErrNotSandboxAccount
	}
	return churchID, accountRef, nil
}

// DepositAccount is the church's sandbox deposit account: the example
// routing number and 12 digits derived from the church's id. Any instance
// answers the same for a church.
func (b *Sandbox) DepositAccount(churchID string) (routingNumber, accountNumber string) {
	sum := b.mac("deposit-account", churchID)
	n := new(big.Int).SetBytes(sum[:8])
	return RoutingNumber, fmt.Sprintf("%012d", n.Mod(n, big.NewInt(1_000_000_000_000)))
}

// digest is a short name derived from s, for ids the sandbox makes.
func (b *Sandbox) digest(what, s string) string {
	sum := b.mac(what, s)
	return ids.EncodeToString(sum[:10])
}

func (b *Sandbox) mac(what, s string) []byte {
	m := hmac.New(sha256.New, b.key)
	m.Write([]byte(what + "\x00" + s))
	return m.Sum(nil)
}
