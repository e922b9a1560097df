package app

import (
	"context"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The payroll step. The donor connects payroll inside the payroll vendor's
// own widget: the service opens it on a switch into the church's deposit
// account for the donor's gift, and the vendor's webhooks say how it went
// (ReceiveVendorEvent). The service never sees payroll credentials.

// Payroll is the payroll-connectivity vendor.
type Payroll interface {
	// StartSwitch makes what opens the vendor's widget on a switch.
	StartSwitch(ctx context.Context, sw PayrollSwitch) (PayrollStart, error)
	// Widget is what the page that opens the widget loads.
	Widget() PayrollWidget
}

// PayrollSwitch is a donor's direct-deposit switch, as the vendor's
// widget is opened on it. It carries nothing that identifies the donor as
// a person: the donor id, and what the church receives.
type PayrollSwitch struct {
	// Reference is the enrollment id the switch creates; the vendor echoes
	// it on every webhook about the switch.
	Reference string
	DonorID   string
	// VendorUser is the vendor's user for the donor from an earlier
	// opening; empty makes one.
	VendorUser string
	// ClientName is the name the widget shows: the partner's.
	ClientName string
	Target     DepositAccount
	Giving     domain.Giving
}

// PayrollStart opens the widget: Token is the vendor's short-lived token
// for it (not stored), VendorUser the vendor's user for the donor.
type PayrollStart struct {
	Token      string
	VendorUser string
}

// PayrollWidget is what the page that opens the vendor's widget loads: the
// vendor's script, and the origins the page's policy allows it.
type PayrollWidget struct {
	ScriptURL string
	Origins   []string
}

// ErrPayrollService means the payroll vendor could not be reached or
// refused to open its widget; the donor can try again.
var ErrPayrollService = errors.New("the payroll connection service could not be reached")

// PayrollWidget is what the page that opens the payroll vendor's widget
// loads.
func (s *Service) PayrollWidget() PayrollWidget { return s.payroll.Widget() }

// StartPayroll opens the payroll vendor's widget on the donor's switch: it
// names the enrollment the switch creates (the same on every opening),
// opens the church's deposit account if it has none, asks the vendor for
// the widget's token and records the opening. The token is returned, never
// stored.
func (s *Service) StartPayroll(ctx context.Context, sess domain.Session, now time.Time) (string, error) {
	s = s.as("app.StartPayroll")
	if sess.Step(now) != domain.StepPayroll {
		return "", domain.ErrWrongStep
	}
	brand, err := s.Brand(sess)
	if err != nil {
		return "", err
	}
	account, err := s.bank.DepositAccount(ctx, sess.ChurchID)
	if err != nil {
		s.log.Error().Err(err).Str("church_id", sess.ChurchID).Msg("deposit account unavailable")
		return "", ErrPayrollService
	}
	enrollment := sess.SwitchEnrollment
	if enrollment == "" {
		enrollment = domain.NewID(domain.PrefixEnrollment)
	}
	start, err := s.payroll.StartSwitch(ctx, PayrollSwitch{
		Reference: enrollment, DonorID: sess.DonorID, VendorUser: sess.VendorUser,
		ClientName: brand.DisplayName, Target: account, Giving: sess.Giving,
	})
	if err != nil {
		s.log.Error().Err(err).Str("session_id", sess.ID).Msg("payroll widget could not be opened")
		return "", ErrPayrollService
	}
	after, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.StartSwitch(cur, enrollment, start.VendorUser, now)
	})
	if err != nil {
		return "", err
	}
	if after.SwitchEnrollment != enrollment {
		// Another request opened the widget first, under its own id: this
		// token carries the wrong reference, so it is not handed out.
		return "", domain.ErrWrongStep
	}
	return start.Token, nil
}

// PayrollOutcome is what the payroll vendor reported about a switch.
type PayrollOutcome string

// The payroll outcomes the service acts on.
const (
	// SwitchSubmitted: the donor finished in the widget and the vendor
	// began the switch: the session completes (enrollment.created).
	SwitchSubmitted PayrollOutcome = "submitted"
	// SwitchConfirmed: the payroll provider confirmed the switch
	// (enrollment.activated); it completes the session first if the
	// submission's webhook was lost.
	SwitchConfirmed PayrollOutcome = "confirmed"
	// SwitchFailed: the switch failed; the donor may try again.
	SwitchFailed PayrollOutcome = "failed"
	// SwitchReverted: the switch was undone (enrollment.ended).
	SwitchReverted PayrollOutcome = "reverted"
)

// PayrollReport is one payroll vendor webhook, reduced: the enrollment the
// switch creates (its reference) and what happened.
type PayrollReport struct {
	EnrollmentID string
	Outcome      PayrollOutcome
	// Reason is the vendor's word for a failure.
	Reason string
}

// payrollReported acts on a payroll vendor's report about a switch.
func (s *Service) payrollReported(ctx context.Context, msgID string, r PayrollReport) (bool, error) {
	if !domain.ValidID(domain.PrefixEnrollment, r.EnrollmentID) {
		return false, unknownReference("%q is not an enrollment's reference.", r.EnrollmentID)
	}
	sess, err := s.switchSession(ctx, r.EnrollmentID)
	if err != nil {
		return false, err
	}
	switch r.Outcome {
	case SwitchFailed:
		_, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
			return domain.FailPayroll(cur, r.Reason, s.Now())
		})
		return err == nil, err
	case SwitchReverted:
		return s.payrollMove(ctx, msgID, sess, func(e *domain.Enrollment, now time.Time) (*domain.Event, error) {
			return domain.EndEnrollment(e, domain.EndSwitchReverted, now)
		})
	}
	after, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.CompleteSession(cur, s.Now())
	})
	if err != nil {
		return false, err
	}
	if err := s.ensureEnrollment(ctx, after); err != nil {
		return false, err
	}
	if r.Outcome == SwitchSubmitted {
		return true, nil
	}
	return s.payrollMove(ctx, msgID, after, domain.ActivateEnrollment)
}

// switchSession is the session whose payroll switch names enrollmentID.
// The webhook may reach an instance whose projections have not applied the
// switch's opening yet: on a miss it waits for them to hold what the
// ledger holds, and looks again.
func (s *Service) switchSession(ctx context.Context, enrollmentID string) (domain.Session, error) {
	sess, ok, err := s.store.SessionBySwitch(enrollmentID)
	if err != nil || ok {
		return sess, err
	}
	if err := s.caughtUp(ctx); err != nil {
		return sess, err
	}
	if sess, ok, err = s.store.SessionBySwitch(enrollmentID); err != nil || ok {
		return sess, err
	}
	return sess, unknownReference("%q is not an enrollment's reference.", enrollmentID)
}

// payrollMove runs the payroll vendor's decision on the session's
// enrollment, once: the command's id derives from the vendor's event id.
func (s *Service) payrollMove(ctx context.Context, msgID string, sess domain.Session, decide func(*domain.Enrollment, time.Time) (*domain.Event, error)) (bool, error) {
	id := sess.EnrollmentID
	if id == "" {
		id = sess.SwitchEnrollment
	}
	return s.runVendor(ctx, eventlog.Command{
		Partner: sess.PartnerID, Aggregate: id, MsgID: msgID + ":0",
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			e := domain.Fold[domain.Enrollment](h.Events)
			if !e.Exists() {
				return nil, domain.ProblemConflict.New("The enrollment %s was not created: its donor never finished connecting payroll.", id)
			}
			return decide(&e, s.Now())
		},
	})
}
