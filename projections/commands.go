package projections

import (
	"encoding/binary"

	"github.com/partnergiving/giving/domain"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/eventlog"
)

// bucketMsgIDs maps a command's dedup id to the sequence of the event it
// appended. Only ids chosen by callers (derived from Idempotency-Keys or
// vendor event ids) are kept; an event's own id needs no index.
var bucketMsgIDs = bucket("msg_ids")

func indexMsgID(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
	if rec.MsgID == "" || ev.ID == rec.MsgID {
		return nil
	}
	return tx.Bucket(bucketMsgIDs).Put([]byte(rec.MsgID), u64(rec.Seq))
}

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
