package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// bucketPublicEvents holds "<partner>/<event id>" → the stream sequence of
// each public event, so one event can be fetched by its id (the ledger
// indexes subjects, not ids) at the cost of one lookup and one read.
var bucketPublicEvents = bucket("public_events")

func init() {
	for _, t := range domain.PublicEventTypes() {
		on(t, indexPublicEvent)
	}
}

func indexPublicEvent(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
	if !rec.Public {
		return nil // a record of a retired internal type of the same name
	}
	return tx.Bucket(bucketPublicEvents).Put([]byte(rec.Partner+"/"+ev.ID), u64(rec.Seq))
}

// PublicEventSeq returns where one of the partner's public events is in the
// ledger.
func (s *Store) PublicEventSeq(partner, eventID string) (uint64, bool, error) {
	var (
		seq uint64
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketPublicEvents).Get([]byte(partner + "/" + eventID)); len(v) == 8 {
			seq, ok = binary.BigEndian.Uint64(v), true
		}
		return nil
	})
	return seq, ok, err
}
