package projections

import (
	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketBalances holds "<partner>/<church id>" → Balance.
	bucketBalances = bucket("church_balances")
	// bucketTraces holds bank trace → "<partner>/<deposit id>", so a trace
	// seen for any church is recognised again.
	bucketTraces = bucket("deposit_traces")
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
		if err := tx.Bucket(bucketTraces).Put([]byte(c.Trace), []byte(ev.PartnerID+"/"+ev.AggregateID)); err != nil {
			return err
		}
		b := tx.Bucket(bucketBalances)
		key := []byte(ev.PartnerID + "/" + ev.ChurchID)
		var bal Balance
		if _, err := getJSON(b, key, &bal); err != nil {
			return err
		}
		if bal.Accounts == nil {
			bal.Accounts = map[string]domain.Hundredths{}
		}
		bal.Total += c.Amount
		bal.Count++
		bal.Accounts[c.AccountRef] += c.Amount
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

// TraceSeen reports whether a bank trace was already credited, to any church.
func (s *Store) TraceSeen(trace string) (bool, error) {
	var seen bool
	err := s.view(func(tx *bolt.Tx) error {
		seen = tx.Bucket(bucketTraces).Get([]byte(trace)) != nil
		return nil
	})
	return seen, err
}
