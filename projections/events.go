package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bucketPublicEvents holds a bucket per partner (see partnerIndex): the
// partner's public events by id, so one event can be fetched by its id
// (the ledger indexes subjects, not ids) at the cost of one lookup and one
// read. The ids are kept in blocks of up to eventBlock (see blocks.go),
// each id's value its sequence (8 bytes, big-endian). Written by
// indexWrites.write.
var bucketPublicEvents = bucket("public_events")

// eventBlock is how many ids a block of a partner's public events holds.
// A key an event cost a rebuild about 2 µs of the process's CPU at a
// million events, whatever its value, as the
// feed's types did before their blocks (typeBlock): in blocks, a rebuild's
// span makes a put for every sixteen of a partner's ids, since ids are made
// in order (domain.NewSortedID) and each span's land after the last
// block's first.
// A live commit rewrites the block its id falls in, about 650 bytes.
// Sixteen measured cheaper than 32 and than 8 (BenchmarkRebuild):
// smaller blocks pack pages better, larger ones make fewer puts.
const eventBlock = 16

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
		v, err := blockGet(events.Cursor(), []byte(eventID))
		if len(v) == 8 {
			seq, ok = binary.BigEndian.Uint64(v), true
		}
		return err
	})
	return seq, ok, err
}
