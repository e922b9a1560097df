package domain

import "time"

// The payroll step. The donor connects payroll inside the payroll vendor's
// own widget, never in the service's pages: the service opens the widget on
// a switch to the church's account and learns the outcome from the
// vendor's webhooks. The enrollment the switch creates is named when the
// widget first opens, so that the vendor carries it as its reference and
// every webhook about the switch leads back to this session.

// PayrollVendor names the payroll-connectivity vendor in the events.
const PayrollVendor = "truv"

// PayrollSwitchStarted records that the donor opened the payroll vendor's
// widget on a switch. EnrollmentID is the enrollment the switch creates,
// the same on every opening of one session; VendorUser is the vendor's
// user for the donor, kept so that opening the widget again does not make
// the vendor a second user.
type PayrollSwitchStarted struct {
	EnrollmentID string `json:"enrollment_id"`
	VendorUser   string `json:"vendor_user,omitempty"`
}

func (*PayrollSwitchStarted) EventType() string { return "donor_session.payroll_started" }

func init() {
	register[PayrollSwitchStarted](false, "The donor opened the payroll vendor's widget on a direct-deposit switch.")
}

// PayrollWait is how long a session waits for the payroll vendor's word on
// a switch the donor started in its widget, past the session's own expiry:
// as long as the widget's token works (Truv's bridge token lasts six
// hours). A switch the vendor submits must find its session open, or money
// would move with no enrollment to show for it.
const PayrollWait = 6 * time.Hour

// Deadline is when the session expires: ExpiresAt, or later while the
// payroll vendor works on a switch the donor started (PayrollWait).
func (s *Session) Deadline() time.Time {
	if s.Status == SessionOpen && s.Payroll() == PayrollWaiting {
		if d := s.SwitchStartedAt.Add(PayrollWait); d.After(s.ExpiresAt) {
			return d
		}
	}
	return s.ExpiresAt
}

// PayrollState is where a session's payroll switch stands.
type PayrollState string

// The payroll switch's states, as the payroll page shows them.
const (
	// PayrollNotStarted: the widget was never opened.
	PayrollNotStarted PayrollState = "not_started"
	// PayrollWaiting: the widget was opened and the vendor has not said
	// how it went.
	PayrollWaiting PayrollState = "waiting"
	// PayrollRefused: the vendor reported a failure since the widget last
	// opened; the donor may try again.
	PayrollRefused PayrollState = "refused"
)

// Payroll is where the session's switch stands at the payroll step.
func (s *Session) Payroll() PayrollState {
	switch {
	case s.SwitchStarts == 0:
		return PayrollNotStarted
	case s.SwitchRefused:
		return PayrollRefused
	}
	return PayrollWaiting
}

// StartSwitch decides that the donor opens the payroll vendor's widget.
// enrollmentID names the enrollment the switch creates; a session that
// named one before keeps it, so every opening carries the same reference.
func StartSwitch(s *Session, enrollmentID, vendorUser string, now time.Time) (*Event, error) {
	if err := s.at(StepPayroll, now); err != nil {
		return nil, err
	}
	if s.SwitchEnrollment != "" {
		enrollmentID = s.SwitchEnrollment
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &PayrollSwitchStarted{EnrollmentID: enrollmentID, VendorUser: vendorUser})
	return &ev, nil
}

// FailPayroll decides recording that the payroll vendor reported the
// switch failed (the donor's sign-in was refused, the provider refused the
// allocation); the donor may try again. A session past the payroll step
// records nothing.
func FailPayroll(s *Session, reason string, now time.Time) (*Event, error) {
	if s.Step(now) != StepPayroll {
		return nil, nil
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &PayrollFailed{Provider: PayrollVendor, Reason: reason})
	return &ev, nil
}
