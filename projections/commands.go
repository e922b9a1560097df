package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bucketMsgIDs maps a command's dedup id to the sequence of the event it
// appended, for the commands run under an Idempotency-Key
// (idempotency.IsRequestMsgID): a retry whose key record was lost looks its
// earlier run's event up here (app's recall), past the ledger's dedup
// window. No one looks up any other id, so none is kept: a vendor
// event's (a bank credit's, a payroll confirmation's) is caught by the
// ledger's dedup and by the command's own decision (a credited trace
// credits nothing), and its entry, at a random place in the bucket, was a
// leaf and a branch page more in every commit of a vendor event. Files
// written before still hold such entries; nothing reads them. Written by
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
