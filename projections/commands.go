package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bucketMsgIDs maps a command's dedup id to the sequence of the event it
// appended. Only ids chosen by callers (derived from Idempotency-Keys or
// vendor event ids) are kept; an event's own id needs no index. Written by
// indexWrites.
var bucketMsgIDs = bucket("msg_ids")

// CommandSeq returns the sequence of the event appended under msgID, if the
// projections have seen one.
func (s *Store) CommandSeq(msgID string) (uint64, bool, error) {
	var seq uint64
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMsgIDs).Get([]byte(msgID)); len(v) == 8 {
			seq = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return seq, seq != 0, err
}
