package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketSessions holds "<partner>/<session id>" → domain.Session.
	bucketSessions = bucket("sessions")
	// bucketSessionTokens holds a flow url token's hash → "<partner>/<session id>".
	bucketSessionTokens = bucket("session_tokens")
	// bucketSessionExpiry holds "<expires unix ms><partner>/<session id>" for
	// open sessions, so the sweeper finds the due ones without a scan.
	bucketSessionExpiry = bucket("session_expiry")
	// bucketDonorSessions holds "<partner>/<donor id>/<session id>", so a
	// vendor's identity result for a donor finds their sessions.
	bucketDonorSessions = bucket("donor_sessions")
	// bucketUnenrolled holds "<partner>/<session id>" → completion time
	// (unix ms) for completed sessions whose enrollment.created has not
	// been applied yet, so the sweeper finds the ones whose enrollment
	// creation failed without a scan of every session.
	bucketUnenrolled = bucket("sessions_unenrolled")
	// bucketSwitchSessions holds the enrollment id a session's payroll
	// switch names → "<partner>/<session id>", so that the payroll vendor's
	// webhook, which carries the enrollment id as its reference, finds the
	// session before the enrollment exists.
	bucketSwitchSessions = bucket("session_switches")
)

func init() {
	for _, t := range []string{
		"donor_session.created", "donor_session.opened", "donor_session.code_sent", "donor_session.code_rejected",
		"donor_session.phone_verified", "donor_session.locked", "donor_session.consented", "donor_session.kyc_decided",
		"donor_session.payroll_failed", "donor_session.completed", "donor_session.expired", "donor_session.declined",
		"donor_session.reconsent_expired", "donor_session.payroll_started", "donor_session.identity_started",
	} {
		on(t, applySession)
	}
}

func sessionKey(partner, id string) []byte { return []byte(partner + "/" + id) }

func expiryKey(s domain.Session) []byte { return timedKey(s.Deadline(), s.PartnerID, s.ID) }

// timedKey is an entry of a time index: "<unix ms><partner>/<id>", so that
// the entries due by a time are a prefix of the bucket in key order.
func timedKey(at time.Time, partner, id string) []byte {
	k := make([]byte, 8, 8+len(partner)+1+len(id))
	binary.BigEndian.PutUint64(k, uint64(at.UnixMilli()))
	return append(k, partner+"/"+id...)
}

// due lists the partner and id of a time index's entries at or before now,
// at most limit of them.
func (s *Store) due(bucket []byte, now time.Time, limit int) (partners, ids []string, err error) {
	end := make([]byte, 8)
	binary.BigEndian.PutUint64(end, uint64(now.UnixMilli()))
	err = s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.First(); k != nil && len(ids) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			partner, id, _ := strings.Cut(string(k[8:]), "/")
			partners, ids = append(partners, partner), append(ids, id)
		}
		return nil
	})
	return partners, ids, err
}

func applySession(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
	b := tx.Bucket(bucketSessions)
	key := sessionKey(ev.PartnerID, ev.AggregateID)
	var s domain.Session
	if _, err := getJSON(b, key, &s); err != nil {
		return err
	}
	var due []byte
	if s.Exists() {
		due = expiryKey(s)
	}
	s.Apply(ev)
	if err := putJSON(b, key, s); err != nil {
		return err
	}
	if due != nil && !bytes.Equal(due, expiryKey(s)) {
		// The deadline moved (a payroll switch started): the old entry
		// goes, the one below replaces it.
		if err := tx.Bucket(bucketSessionExpiry).Delete(due); err != nil {
			return err
		}
	}
	if _, ok := ev.Payload.(*domain.SessionCreated); ok {
		if err := tx.Bucket(bucketSessionTokens).Put([]byte(s.TokenHash), key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketDonorSessions).Put([]byte(s.PartnerID+"/"+s.DonorID+"/"+s.ID), nil); err != nil {
			return err
		}
	}
	switch p := ev.Payload.(type) {
	case *domain.PayrollSwitchStarted:
		if err := tx.Bucket(bucketSwitchSessions).Put([]byte(p.EnrollmentID), key); err != nil {
			return err
		}
	case *domain.DonorSessionCompleted:
		if err := tx.Bucket(bucketSwitchSessions).Put([]byte(p.EnrollmentID), key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUnenrolled).Put(key, u64(uint64(ev.OccurredAt.UnixMilli()))); err != nil {
			return err
		}
	}
	if s.Status == domain.SessionOpen {
		return tx.Bucket(bucketSessionExpiry).Put(expiryKey(s), nil)
	}
	return tx.Bucket(bucketSessionExpiry).Delete(expiryKey(s))
}

// Session returns one of the partner's donor sessions.
func (s *Store) Session(partner, id string) (domain.Session, bool, error) {
	var (
		out domain.Session
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bucketSessions), sessionKey(partner, id), &out)
		return err
	})
	return out, ok, err
}

// SessionByToken returns the session whose flow url token hashes to hash.
func (s *Store) SessionByToken(hash string) (domain.Session, bool, error) {
	return s.sessionBy(bucketSessionTokens, hash)
}

// SessionBySwitch returns the session whose payroll switch names the
// enrollment enrollmentID.
func (s *Store) SessionBySwitch(enrollmentID string) (domain.Session, bool, error) {
	return s.sessionBy(bucketSwitchSessions, enrollmentID)
}

// sessionBy returns the session an index bucket files under key.
func (s *Store) sessionBy(index []byte, key string) (domain.Session, bool, error) {
	var (
		out domain.Session
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		at := tx.Bucket(index).Get([]byte(key))
		if at == nil {
			return nil
		}
		var err error
		ok, err = getJSON(tx.Bucket(bucketSessions), at, &out)
		return err
	})
	return out, ok, err
}

// SessionRef names a session.
type SessionRef struct {
	PartnerID string
	SessionID string
}

// DueSessions lists open sessions whose url expired at or before now, at
// most limit of them.
func (s *Store) DueSessions(now time.Time, limit int) ([]SessionRef, error) {
	partners, ids, err := s.due(bucketSessionExpiry, now, limit)
	out := make([]SessionRef, len(ids))
	for i := range ids {
		out[i] = SessionRef{PartnerID: partners[i], SessionID: ids[i]}
	}
	return out, err
}

// UnenrolledSessions lists completed sessions whose enrollment does not
// exist yet and that completed at or before completedBy, at most limit of
// them.
func (s *Store) UnenrolledSessions(completedBy time.Time, limit int) ([]SessionRef, error) {
	var out []SessionRef
	by := uint64(completedBy.UnixMilli())
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUnenrolled).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) == 8 && binary.BigEndian.Uint64(v) > by {
				continue
			}
			partner, id, _ := strings.Cut(string(k), "/")
			out = append(out, SessionRef{PartnerID: partner, SessionID: id})
		}
		return nil
	})
	return out, err
}

// DonorSessions lists the ids of a donor's sessions with one partner.
func (s *Store) DonorSessions(partner, donor string) ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		out = donorSessionIDs(tx.Bucket(bucketDonorSessions).Cursor(), partner, donor)
		return nil
	})
	return out, err
}

// donorSessionIDs reads the ids of a donor's sessions with one partner from
// the donor index.
func donorSessionIDs(c *bolt.Cursor, partner, donor string) []string {
	var out []string
	prefix := []byte(partner + "/" + donor + "/")
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out
}

// DonorSession is one session opened for a donor, with any partner, and
// the donor's phone as it carries it (nil for a session of a build that
// kept the phone in the donor's own vault entry).
type DonorSession struct {
	PartnerID string              `json:"partner_id"`
	SessionID string              `json:"session_id"`
	Phone     *domain.SealedPhone `json:"phone,omitempty"`
}

// SessionsOfDonor returns every session opened for the donor. A donor id is
// made from one partner and a phone (vault.Vault.DonorID), so all of a
// donor's sessions are with the partner the donors index names: the look-up
// costs the donor's sessions, not the sessions stored.
func (s *Store) SessionsOfDonor(donor string) ([]DonorSession, error) {
	var out []DonorSession
	err := s.view(func(tx *bolt.Tx) error {
		partner := string(tx.Bucket(bucketDonors).Get([]byte(donor)))
		if partner == "" {
			return nil
		}
		sessions := tx.Bucket(bucketSessions)
		for _, id := range donorSessionIDs(tx.Bucket(bucketDonorSessions).Cursor(), partner, donor) {
			var sess domain.Session
			ok, err := getJSON(sessions, sessionKey(partner, id), &sess)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("projections: the donor index names session %s of partner %s, which is missing", id, partner)
			}
			out = append(out, DonorSession{PartnerID: partner, SessionID: id, Phone: sess.Phone})
		}
		return nil
	})
	return out, err
}
