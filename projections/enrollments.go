package projections

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketEnrollments holds "<partner>/<enrollment id>" → EnrollmentView.
	bucketEnrollments = bucket("enrollments")
	// bucketEnrollmentOrder holds "<partner>/*/<seq>" and
	// "<partner>/<church id>/<seq>" → enrollment id, listing in creation
	// order all of a partner's enrollments or one church's.
	bucketEnrollmentOrder = bucket("enrollment_order")
	// bucketConsentDue holds "<expires unix ms><partner>/<enrollment id>"
	// for enrollments waiting for the donor's consent to a higher value, so
	// the sweeper finds the requests past their time without a scan.
	bucketConsentDue = bucket("enrollment_consent_due")
)

// EnrollmentView is an enrollment with the donor it belongs to.
type EnrollmentView struct {
	domain.Enrollment
	DonorID string `json:"donor_id"`
}

func init() {
	for _, t := range []string{
		"enrollment.created", "enrollment.activated", "enrollment.paused", "enrollment.resumed", "enrollment.canceled",
		"enrollment.ended", "enrollment.update_requested", "enrollment.updated", "enrollment.update_expired", "enrollment.cancel_noted",
	} {
		on(t, applyEnrollment)
	}
}

func enrollmentKey(partner, id string) []byte { return []byte(partner + "/" + id) }

func orderPrefix(partner, church string) []byte {
	if church == "" {
		church = "*"
	}
	return []byte(partner + "/" + church + "/")
}

func applyEnrollment(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
	b := tx.Bucket(bucketEnrollments)
	key := enrollmentKey(ev.PartnerID, ev.AggregateID)
	var e EnrollmentView
	if _, err := getJSON(b, key, &e); err != nil {
		return err
	}
	due := tx.Bucket(bucketConsentDue)
	if e.Pending != nil {
		if err := due.Delete(timedKey(e.Pending.ExpiresAt, ev.PartnerID, e.ID)); err != nil {
			return err
		}
	}
	e.Apply(ev)
	if e.Pending != nil {
		if err := due.Put(timedKey(e.Pending.ExpiresAt, ev.PartnerID, e.ID), nil); err != nil {
			return err
		}
	}
	if created, ok := ev.Payload.(*domain.EnrollmentCreated); ok {
		var s domain.Session
		if _, err := getJSON(tx.Bucket(bucketSessions), sessionKey(ev.PartnerID, created.DonorSessionID), &s); err != nil {
			return err
		}
		e.DonorID = s.DonorID
		if err := tx.Bucket(bucketUnenrolled).Delete(sessionKey(ev.PartnerID, created.DonorSessionID)); err != nil {
			return err
		}
		order := tx.Bucket(bucketEnrollmentOrder)
		seq := u64(rec.Seq)
		if err := order.Put(append(orderPrefix(ev.PartnerID, ""), seq...), []byte(e.ID)); err != nil {
			return err
		}
		if err := order.Put(append(orderPrefix(ev.PartnerID, ev.ChurchID), seq...), []byte(e.ID)); err != nil {
			return err
		}
	}
	return putJSON(b, key, e)
}

// Enrollment returns one of the partner's enrollments.
func (s *Store) Enrollment(partner, id string) (EnrollmentView, bool, error) {
	var (
		out EnrollmentView
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bucketEnrollments), enrollmentKey(partner, id), &out)
		return err
	})
	return out, ok, err
}

// EnrollmentFilter narrows an enrollment list.
type EnrollmentFilter struct {
	ChurchID string
	Status   domain.EnrollmentStatus
}

// Enrollments lists the partner's enrollments in creation order after
// position after (nil: from the first), with the position of the last one
// returned and whether more follow.
func (s *Store) Enrollments(partner string, f EnrollmentFilter, after []byte, limit int) (out []EnrollmentView, last []byte, more bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		all := tx.Bucket(bucketEnrollments)
		out, last, more, err = page(tx.Bucket(bucketEnrollmentOrder).Cursor(), orderPrefix(partner, f.ChurchID), after, limit, func(v []byte) (EnrollmentView, bool, error) {
			var e EnrollmentView
			_, err := getJSON(all, enrollmentKey(partner, string(v)), &e)
			return e, f.Status == "" || e.Status == f.Status, err
		})
		return err
	})
	return out, last, more, err
}

// EnrollmentRef names an enrollment.
type EnrollmentRef struct {
	PartnerID    string
	EnrollmentID string
}

// ConsentsDue lists enrollments whose wait for the donor's consent to a
// higher value ran out at or before now, at most limit of them.
func (s *Store) ConsentsDue(now time.Time, limit int) ([]EnrollmentRef, error) {
	partners, ids, err := s.due(bucketConsentDue, now, limit)
	out := make([]EnrollmentRef, len(ids))
	for i := range ids {
		out[i] = EnrollmentRef{PartnerID: partners[i], EnrollmentID: ids[i]}
	}
	return out, err
}
