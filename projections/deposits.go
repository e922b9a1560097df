package projections

import (
	"bytes"
	"encoding/binary"
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
)

// Balance is what a church has received.
type Balance struct {
	Total    domain.Hundredths            `json:"total"`
	Count    int                          `json:"count"`
	Accounts map[string]domain.Hundredths `json:"accounts"`
}

func init() {
	counting("deposit.credited", func(c *counters, ev domain.Event) {
		credit := ev.Payload.(*domain.DepositCredited)
		church := ev.PartnerID + "/" + ev.ChurchID
		total, count := readBalance(c.get(bucketBalances, church))
		// Credits are bounded (domain.MaxCredit), so a sum cannot overflow
		// in practice; if it ever did, the total saturates rather than stop
		// the projector for every partner.
		c.put(bucketBalances, church, balanceBytes(saturatingAdd(total, credit.Amount), count+1))
		account := string(accountKey([]byte(church), credit.AccountRef))
		c.put(bucketAccountTotals, account, u64(uint64(saturatingAdd(readHundredths(c.get(bucketAccountTotals, account)), credit.Amount))))
	})
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

func accountKey(church []byte, account string) []byte {
	return append(append(append([]byte{}, church...), 0), account...)
}

func readBalance(v []byte) (domain.Hundredths, int64) {
	if len(v) != 16 {
		return 0, 0
	}
	return domain.Hundredths(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
}

func balanceBytes(total domain.Hundredths, count int64) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(total))
	binary.BigEndian.PutUint64(b[8:], uint64(count))
	return b
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
