package domain

import "time"

// EnrollmentStatus is where an enrollment is in its life.
//
//	pending ──(payroll provider confirms the deposit switch)──▶ active
//
// An enrollment is created pending when the donor finishes the hosted flow
// and connects payroll. It becomes active, exactly once, when the payroll
// provider confirms the direct-deposit switch. A repeated confirmation of an
// active enrollment changes nothing.
type EnrollmentStatus string

// The enrollment states.
const (
	EnrollmentPending EnrollmentStatus = "pending"
	EnrollmentActive  EnrollmentStatus = "active"
)

// EnrollmentCreated is the public enrollment.created event: the donor
// completed the hosted flow and connected payroll.
type EnrollmentCreated struct {
	EnrollmentID   string           `json:"enrollment_id"`
	DonorSessionID string           `json:"donor_session_id"`
	Status         EnrollmentStatus `json:"status"`
	Mode           Mode             `json:"mode"`
	Value          Hundredths       `json:"value"`
}

// EnrollmentActivated is the public enrollment.activated event: the payroll
// provider confirmed the deposit switch. Its payload is exactly
// {enrollment_id}.
type EnrollmentActivated struct {
	EnrollmentID string `json:"enrollment_id"`
}

func (*EnrollmentCreated) EventType() string   { return "enrollment.created" }
func (*EnrollmentActivated) EventType() string { return "enrollment.activated" }

func init() {
	register[EnrollmentCreated](true, "The donor completed the hosted flow and connected payroll; the enrollment is pending until the payroll provider confirms the deposit switch.")
	register[EnrollmentActivated](true, "The payroll provider confirmed the direct-deposit switch; the enrollment is active.")
}

// Enrollment is the enrollment aggregate.
type Enrollment struct {
	ID          string           `json:"enrollment_id"`
	PartnerID   string           `json:"partner_id"`
	ChurchID    string           `json:"church_id"`
	SessionID   string           `json:"donor_session_id"`
	Status      EnrollmentStatus `json:"status"`
	Giving      Giving           `json:"giving"`
	CreatedAt   time.Time        `json:"created_at"`
	ActivatedAt *time.Time       `json:"activated_at,omitempty"`
}

// Exists reports whether the enrollment was created.
func (e *Enrollment) Exists() bool { return e.ID != "" }

// Apply folds one of the enrollment's events into its state.
func (e *Enrollment) Apply(ev Event) {
	switch p := ev.Payload.(type) {
	case *EnrollmentCreated:
		e.ID, e.PartnerID, e.ChurchID, e.SessionID = p.EnrollmentID, ev.PartnerID, ev.ChurchID, p.DonorSessionID
		e.Status, e.Giving, e.CreatedAt = p.Status, Giving{Mode: p.Mode, Value: p.Value}, ev.OccurredAt
	case *EnrollmentActivated:
		at := ev.OccurredAt
		e.Status, e.ActivatedAt = EnrollmentActive, &at
	}
}

// NewEnrollment is what creating an enrollment needs.
type NewEnrollment struct {
	ID        string
	PartnerID string
	ChurchID  string
	SessionID string
	Giving    Giving
}

// CreateEnrollment decides creating a pending enrollment. Creating one that
// exists is a conflict; callers that retry use the same id and treat the
// conflict as done.
func CreateEnrollment(e *Enrollment, n NewEnrollment, now time.Time) (Event, error) {
	if e.Exists() {
		return Event{}, ProblemConflict.New("Enrollment %s already exists.", n.ID)
	}
	return NewEvent(n.PartnerID, n.ID, n.ChurchID, now, &EnrollmentCreated{
		EnrollmentID: n.ID, DonorSessionID: n.SessionID, Status: EnrollmentPending, Mode: n.Giving.Mode, Value: n.Giving.Value,
	}), nil
}

// ActivateEnrollment decides the move from pending to active. It returns a
// nil event when the enrollment is already active, so a repeated
// confirmation emits nothing.
func ActivateEnrollment(e *Enrollment, now time.Time) (*Event, error) {
	switch {
	case !e.Exists():
		return nil, NotFound("enrollment", e.ID)
	case e.Status == EnrollmentActive:
		return nil, nil
	case e.Status != EnrollmentPending:
		return nil, ProblemConflict.New("Enrollment %s is %s and cannot become active.", e.ID, e.Status)
	}
	ev := NewEvent(e.PartnerID, e.ID, e.ChurchID, now, &EnrollmentActivated{EnrollmentID: e.ID})
	return &ev, nil
}
