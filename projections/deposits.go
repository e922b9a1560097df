package projections

import (
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketBalances holds "<partner>/<church id>" → Balance.
	bucketBalances = bucket("church_balances")
)

// Balance is what a church has received.
type Balance struct {
	Total    domain.Hundredths            `json:"total"`
	Count    int                          `json:"count"`
	Accounts map[string]domain.Hundredths `json:"accounts"`
}

func init() {
	on("deposit.credited", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		c := ev.Payload.(*domain.DepositCredited)
		b := tx.Bucket(bucketBalances)
		key := []byte(ev.PartnerID + "/" + ev.ChurchID)
		var bal Balance
		if _, err := getJSON(b, key, &bal); err != nil {
			return err
		}
		if bal.Accounts == nil {
			bal.Accounts = map[string]domain.Hundredths{}
		}
		// Credits are bounded (domain.MaxCredit), so a sum cannot overflow
		// in practice; if it ever did, the total saturates rather than stop
		// the projector for every partner.
		bal.Total = saturatingAdd(bal.Total, c.Amount)
		bal.Accounts[c.AccountRef] = saturatingAdd(bal.Accounts[c.AccountRef], c.Amount)
		bal.Count++
		return putJSON(b, key, bal)
	})
}

// ChurchBalance returns what one of the partner's churches has received.
func (s *Store) ChurchBalance(partner, church string) (Balance, error) {
	var bal Balance
	err := s.view(func(tx *bolt.Tx) error {
		_, err := getJSON(tx.Bucket(bucketBalances), []byte(partner+"/"+church), &bal)
		return err
	})
	return bal, err
}

func saturatingAdd(a, b domain.Hundredths) domain.Hundredths {
	if sum, ok := a.Add(b); ok {
		return sum
	}
	return domain.Hundredths(math.MaxInt64)
}
