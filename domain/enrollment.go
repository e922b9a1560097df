package domain

import (
	"strings"
	"time"
	"unicode/utf8"
)

// EnrollmentStatus is where an enrollment is in its life.
//
//	                 (payroll provider confirms the deposit switch)
//	     pending ───────────────────────────────────────────────▶ active ◀──┐
//	        │                                                      │  ▲      │
//	        │                                           pause      │  │ resume
//	        │                                                      ▼  │      │
//	        │                                                     paused     │
//	        │                                                                │
//	        │   update to a higher value (from pending, active or paused)    │
//	        └──────────────▶ pending_consent ── donor consents, or the ──────┘
//	                                            url expires: back to the
//	                                            status it had
//
//	pending | active | paused | pending_consent ──(partner cancels)──▶ canceled
//	pending | active | paused ──(payroll side ends it)──────────────▶ ended
//
// An enrollment is created pending when the donor finishes the hosted flow
// and connects payroll, and becomes active, once, when the payroll provider
// confirms the direct-deposit switch. The partner may pause an active one
// and resume a paused one. A lower value applies at once
// (enrollment.updated); a higher one needs the donor's consent, so the
// enrollment waits in pending_consent (only a cancel is allowed there) until
// the donor consents to the new amount (enrollment.updated) or the consent
// url expires (enrollment.update_expired), and then returns to the status it
// had. Canceled (by the partner) and ended (the payroll side ended it: the
// donor left the employer, or the deposit switch was reverted) are final.
//
// Every decision below returns a nil event for a move to the state the
// enrollment is already in (a repeated cancel, a resume of an active
// enrollment), so a repeat appends nothing, and a ProblemInvalidTransition
// naming the current status for a move the status does not allow.
type EnrollmentStatus string

// The enrollment states.
const (
	EnrollmentPending        EnrollmentStatus = "pending"
	EnrollmentActive         EnrollmentStatus = "active"
	EnrollmentPaused         EnrollmentStatus = "paused"
	EnrollmentPendingConsent EnrollmentStatus = "pending_consent"
	EnrollmentCanceled       EnrollmentStatus = "canceled"
	EnrollmentEnded          EnrollmentStatus = "ended"
)

// EnrollmentStatuses lists every state, in the order of a life.
var EnrollmentStatuses = []EnrollmentStatus{
	EnrollmentPending, EnrollmentActive, EnrollmentPaused, EnrollmentPendingConsent, EnrollmentCanceled, EnrollmentEnded,
}

// Final reports whether no move leaves the state.
func (s EnrollmentStatus) Final() bool { return s == EnrollmentCanceled || s == EnrollmentEnded }

// Why an enrollment was canceled or ended, as its events say.
const (
	CancelPartnerRequest = "partner_request"
	EndLeftEmployer      = "left_employer"
	EndSwitchReverted    = "deposit_switch_reverted"
)

// EndReasons are the payroll side's reasons for ending an enrollment.
var EndReasons = []string{EndLeftEmployer, EndSwitchReverted}

// MaxCancelReason bounds the free-text reason a partner may give for a
// cancel, in characters.
const MaxCancelReason = 500

// EnrollmentCreated is the public enrollment.created event: the donor
// completed the hosted flow and connected payroll.
type EnrollmentCreated struct {
	EnrollmentID   string           `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
	DonorSessionID string           `json:"donor_session_id" jsonschema:"pattern=^ds_[0-9A-Za-z]{27}$" jsonschema_description:"The donor session the donor completed."`
	Status         EnrollmentStatus `json:"status" jsonschema:"enum=pending" jsonschema_description:"An enrollment is created pending."`
	Mode           Mode             `json:"mode" jsonschema:"enum=pct,enum=fixed" jsonschema_description:"pct: a percentage of each paycheck; fixed: a dollar amount from each paycheck."`
	Value          Hundredths       `json:"value" jsonschema:"exclusiveMinimum=0" jsonschema_description:"The configured giving value, always written with two decimals (2.50); a percentage (at most 100) for pct, dollars for fixed."`
}

// EnrollmentActivated is the public enrollment.activated event: the payroll
// provider confirmed the deposit switch. Its payload is exactly
// {enrollment_id}.
type EnrollmentActivated struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
}

// EnrollmentPause is the public enrollment.paused event.
type EnrollmentPause struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
}

// EnrollmentResume is the public enrollment.resumed event.
type EnrollmentResume struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
}

// EnrollmentCancel is the public enrollment.canceled event. The partner's
// free-text reason is never here: it is sealed in an internal
// EnrollmentCancelNote.
type EnrollmentCancel struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
	ReasonCode   string `json:"reason_code" jsonschema:"enum=partner_request" jsonschema_description:"partner_request: the partner canceled it (POST /v1/enrollments/{enrollment_id}/cancel)."`
}

// EnrollmentEnd is the public enrollment.ended event: the payroll side
// ended the enrollment.
type EnrollmentEnd struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
	ReasonCode   string `json:"reason_code" jsonschema:"enum=left_employer,enum=deposit_switch_reverted" jsonschema_description:"left_employer: the donor left the employer; deposit_switch_reverted: the direct-deposit switch was reverted."`
}

// EnrollmentUpdate is the public enrollment.updated event: a new value
// took effect (a lower one at once, a higher one once the donor consented).
type EnrollmentUpdate struct {
	EnrollmentID string     `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
	Value        Hundredths `json:"value" jsonschema:"exclusiveMinimum=0" jsonschema_description:"The value now in effect, in the enrollment's mode, always written with two decimals."`
}

// EnrollmentUpdateExpiry is the public enrollment.update_expired event: the
// donor did not consent to a higher value in time; the old value stays.
type EnrollmentUpdateExpiry struct {
	EnrollmentID string `json:"enrollment_id" jsonschema:"pattern=^en_[0-9A-Za-z]{27}$"`
}

// EnrollmentUpdateRequest records that the partner asked for a higher
// value, which waits for the donor's consent in the re-consent session
// until ExpiresAt. Internal: the partner learns it from the API answer.
type EnrollmentUpdateRequest struct {
	Value            Hundredths `json:"value"`
	ConsentSessionID string     `json:"consent_session_id"`
	ExpiresAt        string     `json:"expires_at"`
}

// EnrollmentCancelNote keeps the partner's free-text reason for a cancel,
// sealed (its text may name people), for the partner's own reads. Internal:
// never on a webhook or the feed.
type EnrollmentCancelNote struct {
	Sealed []byte `json:"sealed"`
}

func (*EnrollmentCreated) EventType() string       { return "enrollment.created" }
func (*EnrollmentActivated) EventType() string     { return "enrollment.activated" }
func (*EnrollmentPause) EventType() string         { return "enrollment.paused" }
func (*EnrollmentResume) EventType() string        { return "enrollment.resumed" }
func (*EnrollmentCancel) EventType() string        { return "enrollment.canceled" }
func (*EnrollmentEnd) EventType() string           { return "enrollment.ended" }
func (*EnrollmentUpdate) EventType() string        { return "enrollment.updated" }
func (*EnrollmentUpdateExpiry) EventType() string  { return "enrollment.update_expired" }
func (*EnrollmentUpdateRequest) EventType() string { return "enrollment.update_requested" }
func (*EnrollmentCancelNote) EventType() string    { return "enrollment.cancel_noted" }

func init() {
	register[EnrollmentCreated](true, "The donor completed the hosted flow and connected payroll; the enrollment is pending until the payroll provider confirms the deposit switch.")
	register[EnrollmentActivated](true, "The payroll provider confirmed the direct-deposit switch; the enrollment is active.")
	register[EnrollmentPause](true, "The partner paused an active enrollment; no deduction is made while it is paused.")
	register[EnrollmentResume](true, "The partner resumed a paused enrollment; it is active again.")
	register[EnrollmentCancel](true, "The partner canceled the enrollment; this is final.")
	register[EnrollmentEnd](true, "The payroll side ended the enrollment (the donor left the employer, or the deposit switch was reverted); this is final.")
	register[EnrollmentUpdate](true, "A new giving value took effect: a lower one at once, a higher one once the donor consented to it.")
	register[EnrollmentUpdateExpiry](true, "The donor did not consent to a higher value before the consent url expired; the enrollment keeps its value and returns to the status it had.")
	register[EnrollmentUpdateRequest](false, "The partner asked for a higher value; the enrollment waits for the donor's consent.")
	register[EnrollmentCancelNote](false, "The partner's reason for a cancel, sealed, for the partner's reads.")
}

// PendingUpdate is a higher value waiting for the donor's consent.
type PendingUpdate struct {
	Value            Hundredths       `json:"value"`
	ConsentSessionID string           `json:"consent_session_id"`
	ExpiresAt        time.Time        `json:"expires_at"`
	Resume           EnrollmentStatus `json:"resume"` // the status it had, and returns to
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
	PausedAt    *time.Time       `json:"paused_at,omitempty"`
	CanceledAt  *time.Time       `json:"canceled_at,omitempty"`
	EndedAt     *time.Time       `json:"ended_at,omitempty"`
	EndReason   string           `json:"end_reason,omitempty"`
	Pending     *PendingUpdate   `json:"pending_update,omitempty"`
	// CancelNote is the partner's sealed reason for the cancel, if it gave
	// one.
	CancelNote []byte `json:"cancel_note,omitempty"`
}

// Exists reports whether the enrollment was created.
func (e *Enrollment) Exists() bool { return e.ID != "" }

// Apply folds one of the enrollment's events into its state.
func (e *Enrollment) Apply(ev Event) {
	at := ev.OccurredAt
	switch p := ev.Payload.(type) {
	case *EnrollmentCreated:
		e.ID, e.PartnerID, e.ChurchID, e.SessionID = p.EnrollmentID, ev.PartnerID, ev.ChurchID, p.DonorSessionID
		e.Status, e.Giving, e.CreatedAt = p.Status, Giving{Mode: p.Mode, Value: p.Value}, at
	case *EnrollmentActivated:
		e.Status, e.ActivatedAt = EnrollmentActive, &at
	case *EnrollmentPause:
		e.Status, e.PausedAt = EnrollmentPaused, &at
	case *EnrollmentResume:
		e.Status, e.PausedAt = EnrollmentActive, nil
	case *EnrollmentCancel:
		e.Status, e.CanceledAt, e.Pending = EnrollmentCanceled, &at, nil
	case *EnrollmentEnd:
		e.Status, e.EndedAt, e.EndReason = EnrollmentEnded, &at, p.ReasonCode
	case *EnrollmentUpdateRequest:
		expires, _ := time.Parse(TimeLayout, p.ExpiresAt)
		e.Pending = &PendingUpdate{Value: p.Value, ConsentSessionID: p.ConsentSessionID, ExpiresAt: expires, Resume: e.Status}
		e.Status = EnrollmentPendingConsent
	case *EnrollmentUpdate:
		e.Giving.Value = p.Value
		e.settle()
	case *EnrollmentUpdateExpiry:
		e.settle()
	case *EnrollmentCancelNote:
		e.CancelNote = p.Sealed
	}
}

// settle ends a wait for consent, back in the status it had.
func (e *Enrollment) settle() {
	if e.Pending != nil {
		e.Status, e.Pending = e.Pending.Resume, nil
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

// move is the shape of every status change: nothing when the enrollment is
// already in target, the event when its status is one of from, and a
// conflict naming the current status otherwise.
func (e *Enrollment) move(what string, target EnrollmentStatus, from []EnrollmentStatus, p Payload, now time.Time) (*Event, error) {
	if !e.Exists() {
		return nil, NotFound("enrollment", e.ID)
	}
	if e.Status == target {
		return nil, nil
	}
	for _, f := range from {
		if e.Status == f {
			ev := NewEvent(e.PartnerID, e.ID, e.ChurchID, now, p)
			return &ev, nil
		}
	}
	return nil, e.refuse(what)
}

// refuse is the conflict for a move the current status does not allow.
func (e *Enrollment) refuse(what string) error {
	return ProblemInvalidTransition.New("Enrollment %s is %s and cannot %s; %s", e.ID, e.Status, what, e.Status.allows())
}

// allows says which moves the status allows, for a conflict's detail.
func (s EnrollmentStatus) allows() string {
	switch s {
	case EnrollmentPending:
		return "a pending enrollment can be canceled or updated, and becomes active when the payroll provider confirms it."
	case EnrollmentActive:
		return "an active enrollment can be paused, canceled or updated."
	case EnrollmentPaused:
		return "a paused enrollment can be resumed, canceled or updated."
	case EnrollmentPendingConsent:
		return "while the donor's consent to a new value is pending, only a cancel is allowed."
	}
	return string(s) + " is final."
}

// ActivateEnrollment decides the move from pending to active. It returns a
// nil event when the enrollment was activated before (whatever its status
// now), so a repeated confirmation emits nothing.
func ActivateEnrollment(e *Enrollment, now time.Time) (*Event, error) {
	if e.Exists() && e.ActivatedAt != nil {
		return nil, nil
	}
	return e.move("become active", EnrollmentActive, []EnrollmentStatus{EnrollmentPending},
		&EnrollmentActivated{EnrollmentID: e.ID}, now)
}

// PauseEnrollment decides pausing an active enrollment.
func PauseEnrollment(e *Enrollment, now time.Time) (*Event, error) {
	return e.move("be paused", EnrollmentPaused, []EnrollmentStatus{EnrollmentActive},
		&EnrollmentPause{EnrollmentID: e.ID}, now)
}

// ResumeEnrollment decides resuming a paused enrollment.
func ResumeEnrollment(e *Enrollment, now time.Time) (*Event, error) {
	return e.move("be resumed", EnrollmentActive, []EnrollmentStatus{EnrollmentPaused},
		&EnrollmentResume{EnrollmentID: e.ID}, now)
}

// CancelEnrollment decides the partner's cancel. Any status but ended may be
// canceled, a pending consent included (the higher value is dropped).
func CancelEnrollment(e *Enrollment, now time.Time) (*Event, error) {
	return e.move("be canceled", EnrollmentCanceled,
		[]EnrollmentStatus{EnrollmentPending, EnrollmentActive, EnrollmentPaused, EnrollmentPendingConsent},
		&EnrollmentCancel{EnrollmentID: e.ID, ReasonCode: CancelPartnerRequest}, now)
}

// ValidCancelReason checks a partner's free-text reason.
func ValidCancelReason(reason string) *FieldError {
	switch {
	case !utf8.ValidString(reason):
		return &FieldError{Field: "reason", Detail: "must be valid UTF-8 text"}
	case utf8.RuneCountInString(reason) > MaxCancelReason:
		return &FieldError{Field: "reason", Detail: "must be at most 500 characters"}
	}
	return nil
}

// NoteCancelReason decides keeping the sealed reason of the cancel that was
// just made. It records nothing unless the enrollment is canceled without a
// reason yet: a repeated cancel changes nothing, its reason included.
func NoteCancelReason(e *Enrollment, sealed []byte, now time.Time) *Event {
	if e.Status != EnrollmentCanceled || e.CancelNote != nil || len(sealed) == 0 {
		return nil
	}
	ev := NewEvent(e.PartnerID, e.ID, e.ChurchID, now, &EnrollmentCancelNote{Sealed: sealed})
	return &ev
}

// EndEnrollment decides the payroll side ending an enrollment. Ending an
// ended enrollment changes nothing, whatever the reason.
func EndEnrollment(e *Enrollment, reason string, now time.Time) (*Event, error) {
	if !validEndReason(reason) {
		return nil, ProblemValidation.New("reason must be one of %s", strings.Join(EndReasons, ", "))
	}
	return e.move("end", EnrollmentEnded, []EnrollmentStatus{EnrollmentPending, EnrollmentActive, EnrollmentPaused},
		&EnrollmentEnd{EnrollmentID: e.ID, ReasonCode: reason}, now)
}

func validEndReason(r string) bool {
	for _, ok := range EndReasons {
		if r == ok {
			return true
		}
	}
	return false
}

// ConsentRequest is what a raise of an enrollment's value needs, should it
// be one: the re-consent session to open and when it expires.
type ConsentRequest struct {
	SessionID string
	ExpiresAt time.Time
}

// UpdateEnrollment decides a new value for the enrollment, in its mode. The
// same value changes nothing; a lower one applies at once
// (enrollment.updated); a higher one waits for the donor's consent
// (enrollment.update_requested, status pending_consent) in the re-consent
// session consent names, because the donor consented to the old amount
// only.
func UpdateEnrollment(e *Enrollment, value Hundredths, consent ConsentRequest, now time.Time) (*Event, error) {
	if !e.Exists() {
		return nil, NotFound("enrollment", e.ID)
	}
	switch e.Status {
	case EnrollmentPending, EnrollmentActive, EnrollmentPaused:
	default:
		return nil, e.refuse("be updated")
	}
	var p Payload
	switch {
	case value == e.Giving.Value:
		return nil, nil
	case value < e.Giving.Value:
		p = &EnrollmentUpdate{EnrollmentID: e.ID, Value: value}
	default:
		p = &EnrollmentUpdateRequest{Value: value, ConsentSessionID: consent.SessionID, ExpiresAt: FormatTime(consent.ExpiresAt)}
	}
	ev := NewEvent(e.PartnerID, e.ID, e.ChurchID, now, p)
	return &ev, nil
}

// SettleUpdate decides how a wait for consent ends, once its re-consent
// session can no longer change: the new value takes effect when the donor
// consented (enrollment.updated), and the old one stays when the session
// expired, or was never opened and the request is past its time
// (enrollment.update_expired). It returns nil while the session is open, and
// when the enrollment no longer waits for that session (settled already, or
// canceled).
func SettleUpdate(e *Enrollment, s *Session, now time.Time) *Event {
	if e.Status != EnrollmentPendingConsent || e.Pending == nil || (s.Exists() && s.ID != e.Pending.ConsentSessionID) {
		return nil
	}
	var p Payload
	switch {
	case s.Exists() && s.Status == SessionCompleted:
		p = &EnrollmentUpdate{EnrollmentID: e.ID, Value: e.Pending.Value}
	case s.Exists() && s.Status == SessionExpired, !s.Exists() && !now.Before(e.Pending.ExpiresAt):
		p = &EnrollmentUpdateExpiry{EnrollmentID: e.ID}
	default:
		return nil
	}
	ev := NewEvent(e.PartnerID, e.ID, e.ChurchID, now, p)
	return &ev
}
