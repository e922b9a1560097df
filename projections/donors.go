package projections

import (
	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// bucketDonors holds donor id → partner id for every donor a session was
// ever opened for: the vault sweep keeps a stored phone only if a session
// refers to it, and a donor's sessions are found with their partner
// (SessionsOfDonor).
var bucketDonors = bucket("donors")

func init() {
	on("donor_session.created", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		return tx.Bucket(bucketDonors).Put([]byte(ev.Payload.(*domain.SessionCreated).DonorID), []byte(ev.PartnerID))
	})
}

// DonorReferenced reports whether a session was opened for the donor.
func (s *Store) DonorReferenced(donorID string) (bool, error) {
	var found bool
	err := s.view(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketDonors).Get([]byte(donorID)) != nil
		return nil
	})
	return found, err
}
