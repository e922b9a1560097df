package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
)

var (
	// bucketBalances holds "<partner>/<church id>" → total and count, as
	// two big-endian int64s: a credit updates 16 bytes, however many
	// deposits and accounts the church has seen.
	bucketBalances = bucket("church_balances")
	// bucketAccountTotals holds "<partner>/<church id>\x00<account ref>" →
	// that account's total, a big-endian int64.
	bucketAccountTotals = bucket("church_account_totals")
	// bucketDeposits holds "<partner>/<trace>" → what is known of that
	// deposit (appendDeposit), for the next credit of the trace to decide
	// from, in blocks of up to depositBlock (see blocks.go).
	bucketDeposits = bucket("deposits")
)

// depositBlock is how many deposits a block of the deposits by trace
// holds. A deposit was once a key of its own: a build wrote
// each twice, into its span's run and into the table, and the merge of the
// runs, after the last span and on one core, put a million keys in 0.7-1.0
// s of a 7.4-9.4 s build, most of it bbolt's seek and insert of each key.
// In blocks, a million-deposit build ran at 140-148k events/s against
// 128-131k (BenchmarkRebuildMillion); blocks of 4, 6 and 8 measured alike,
// and 4 left the smallest file (785 bytes an event against 810 at 6 and 8,
// 759 before). A live credit rewrites its block,
// about 600 bytes, in the page it rewrote anyway.
const depositBlock = 4

// Balance is what a church has received.
type Balance struct {
	Total    domain.Hundredths            `json:"total"`
	Count    int                          `json:"count"`
	Accounts map[string]domain.Hundredths `json:"accounts"`
}

func init() {
	counting("deposit.credited", func(c *counters, ev domain.Event) {
		credit := ev.Payload.(*domain.DepositCredited)
		church := c.key(ev.PartnerID, "/", ev.ChurchID)
		total, count := readBalance(c.get(bucketBalances, church))
		// Credits are bounded (domain.MaxCredit), so a sum cannot overflow
		// in practice; if it ever did, the total saturates rather than stop
		// the projector for every partner.
		c.put(bucketBalances, church, appendBalance(c.scratch(), saturatingAdd(total, credit.Amount), count+1))
		account := accountKey(church, credit.AccountRef)
		sum := saturatingAdd(readHundredths(c.get(bucketAccountTotals, account)), credit.Amount)
		c.put(bucketAccountTotals, account, binary.BigEndian.AppendUint64(c.scratch(), uint64(sum)))
		if ev.AggregateID == domain.DepositBook {
			// A credit in the book is always carried by its
			// announcement, whose adder records the deposit whole.
			return
		}
		// A credit an earlier build recorded on its own (announced by
		// a later event, or never).
		key := c.key(ev.PartnerID, "/", credit.Trace)
		d, _ := readDeposit(c.get(bucketDeposits, key)) // only this file's own writes; a credit sets every field
		d.ChurchID, d.AccountRef, d.Amount, d.BankTS, d.Credited = ev.ChurchID, credit.AccountRef, credit.Amount, credit.BankTS, true
		c.put(bucketDeposits, key, appendDeposit(c.scratch(), d))
	})
	// A deposit.received carrying its credit is applied from the credit
	// alone (see decodeForApply: its public payload is not decoded).
	counting("deposit.received", func(c *counters, ev domain.Event) {
		if credit, ok := ev.Internal.(*domain.DepositCredited); ok {
			c.put(bucketDeposits, c.key(ev.PartnerID, "/", credit.Trace), appendDeposit(c.scratch(), domain.Deposit{
				ChurchID: ev.ChurchID, AccountRef: credit.AccountRef, Amount: credit.Amount, BankTS: credit.BankTS, Credited: true, Announced: true,
			}))
			return
		}
		// An announcement carrying nothing: of a credit recorded before
		// it, on its own (an earlier build's, or one such a build left
		// unannounced). A deposit record this file cannot read (it wrote
		// every one, so never seen) is kept as it is, so that the next
		// credit of the trace fails to read it rather than credit again.
		key := c.key(ev.PartnerID, "/", ev.Payload.(*domain.DepositReceived).Trace)
		d, err := readDeposit(c.get(bucketDeposits, key))
		if err != nil {
			return
		}
		d.Announced = true
		c.put(bucketDeposits, key, appendDeposit(c.scratch(), d))
	})
}

// Deposit returns what is known of the partner's deposit with trace (zero
// when nothing is).
func (s *Store) Deposit(partner, trace string) (domain.Deposit, error) {
	var d domain.Deposit
	err := s.view(func(tx *bolt.Tx) error {
		v, err := depositGet(tx, []byte(partner+"/"+trace))
		if err != nil {
			return err
		}
		d, err = readDeposit(v)
		return err
	})
	return d, err
}

// appendDeposit appends a deposit's state to b: flags (1 credited, 2
// announced), the amount (big-endian int64), then the church id, the bank
// timestamp and the account ref, each after its length in one byte (ids,
// timestamps and refs are short: domain.ValidateCredit bounds a ref to 64
// bytes).
func appendDeposit(b []byte, d domain.Deposit) []byte {
	var flags byte
	if d.Credited {
		flags |= 1
	}
	if d.Announced {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(d.Amount))
	for _, f := range []string{d.ChurchID, d.BankTS, d.AccountRef} {
		b = append(append(b, byte(min(len(f), 255))), f[:min(len(f), 255)]...)
	}
	return b
}

// readDeposit decodes appendDeposit's encoding; nil (no deposit yet) is the zero
// deposit.
func readDeposit(v []byte) (domain.Deposit, error) {
	if v == nil {
		return domain.Deposit{}, nil
	}
	if len(v) < 9 {
		return domain.Deposit{}, fmt.Errorf("projections: deposit record of %d bytes", len(v))
	}
	d := domain.Deposit{Credited: v[0]&1 != 0, Announced: v[0]&2 != 0, Amount: domain.Hundredths(binary.BigEndian.Uint64(v[1:9]))}
	rest := v[9:]
	for _, f := range []*string{&d.ChurchID, &d.BankTS, &d.AccountRef} {
		if len(rest) == 0 || int(rest[0]) > len(rest)-1 {
			return domain.Deposit{}, fmt.Errorf("projections: deposit record truncated")
		}
		*f, rest = string(rest[1:1+rest[0]]), rest[1+rest[0]:]
	}
	return d, nil
}

// ChurchBalance returns what one of the partner's churches has received.
func (s *Store) ChurchBalance(partner, church string) (Balance, error) {
	bal := Balance{Accounts: map[string]domain.Hundredths{}}
	err := s.view(func(tx *bolt.Tx) error {
		key := []byte(partner + "/" + church)
		total, count := readBalance(tx.Bucket(bucketBalances).Get(key))
		bal.Total, bal.Count = total, int(count)
		prefix := accountKey(key, "")
		c := tx.Bucket(bucketAccountTotals).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			bal.Accounts[string(k[len(prefix):])] = readHundredths(v)
		}
		return nil
	})
	return bal, err
}

// accountKey returns an account's key in bucketAccountTotals, appended to
// church, the church's key in bucketBalances (whose slice it may reuse).
func accountKey(church []byte, account string) []byte {
	return append(append(church, 0), account...)
}

func readBalance(v []byte) (domain.Hundredths, int64) {
	if len(v) != 16 {
		return 0, 0
	}
	return domain.Hundredths(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
}

// appendBalance appends a balance's total and count to b.
func appendBalance(b []byte, total domain.Hundredths, count int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, uint64(total)), uint64(count))
}

func readHundredths(v []byte) domain.Hundredths {
	if len(v) != 8 {
		return 0
	}
	return domain.Hundredths(binary.BigEndian.Uint64(v))
}

func saturatingAdd(a, b domain.Hundredths) domain.Hundredths {
	if sum, ok := a.Add(b); ok {
		return sum
	}
	return domain.Hundredths(math.MaxInt64)
}
