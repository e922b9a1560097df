package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bucketPublicEvents holds a bucket per partner (see partnerIndex): <event
// id> → the stream sequence of each public event, so one event can be
// fetched by its id (the ledger indexes subjects, not ids) at the cost of
// one lookup and one read. Written by indexWrites.
var bucketPublicEvents = bucket("public_events")

// PublicEventSeq returns where one of the partner's public events is in the
// ledger.
func (s *Store) PublicEventSeq(partner, eventID string) (uint64, bool, error) {
	var (
		seq uint64
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		events := partnerIndexOf(tx, bucketPublicEvents, partner)
		if events == nil {
			return nil
		}
		if v := events.Get([]byte(eventID)); len(v) == 8 {
			seq, ok = binary.BigEndian.Uint64(v), true
		}
		return nil
	})
	return seq, ok, err
}
