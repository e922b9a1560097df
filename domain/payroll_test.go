package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// atPayroll is a session whose donor passed every step before payroll.
func atPayroll(t *testing.T, now time.Time) domain.Session {
	t.Helper()
	var s domain.Session
	created, err := domain.CreateSession(&s, domain.NewSession{ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1",
		Giving: domain.Giving{Mode: domain.ModePercent, Value: 3_00}}, now)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(created)
	for _, step := range []func(*domain.Session, time.Time) (*domain.Event, error){
		domain.SendCode,
		func(s *domain.Session, now time.Time) (*domain.Event, error) { return domain.CheckCode(s, true, now) },
		func(s *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.Consent(s, domain.ConsentTerms{Church: "Grace", Partner: "Acme"}, "", now)
		},
		func(s *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.DecideKYC(s, domain.KYCPassed, "test", now)
		},
	} {
		ev, err := step(&s, now)
		if err != nil || ev == nil {
			t.Fatalf("step: %v", err)
		}
		s.Apply(*ev)
	}
	return s
}

func apply(t *testing.T, s *domain.Session, ev *domain.Event, err error) {
	t.Helper()
	if err != nil || ev == nil {
		t.Fatalf("decision: %v %v", ev, err)
	}
	s.Apply(*ev)
}

// The widget's openings keep the enrollment the first named; the vendor's
// last word since the widget opened says where the switch stands; the
// submission completes the session with that enrollment, once.
func TestPayrollSwitchDecisions(t *testing.T) {
	now := time.Now()
	s := atPayroll(t, now)
	if s.Payroll() != domain.PayrollNotStarted {
		t.Fatalf("before the widget: %s", s.Payroll())
	}
	if _, err := domain.CompleteSession(&s, now); !errors.Is(err, domain.ErrWrongStep) {
		t.Fatalf("completed without a switch: %v", err)
	}
	en := domain.NewID(domain.PrefixEnrollment)
	ev, err := domain.StartSwitch(&s, en, "user-1", now)
	apply(t, &s, ev, err)
	ev, err = domain.StartSwitch(&s, domain.NewID(domain.PrefixEnrollment), "", now)
	apply(t, &s, ev, err)
	if s.SwitchEnrollment != en || s.VendorUser != "user-1" || s.SwitchStarts != 2 || s.Payroll() != domain.PayrollWaiting {
		t.Fatalf("after two openings: %+v", s)
	}
	ev, err = domain.FailPayroll(&s, "login_error", now)
	apply(t, &s, ev, err)
	if s.Payroll() != domain.PayrollRefused {
		t.Fatalf("after a failure: %s", s.Payroll())
	}
	ev, err = domain.StartSwitch(&s, "", "", now)
	apply(t, &s, ev, err)
	if s.Payroll() != domain.PayrollWaiting {
		t.Fatalf("a retry after a failure: %s", s.Payroll())
	}
	ev, err = domain.CompleteSession(&s, now)
	apply(t, &s, ev, err)
	if s.Status != domain.SessionCompleted || s.EnrollmentID != en || s.EnrollmentFor().ID != en {
		t.Fatalf("completed: %+v", s)
	}
	if ev, err := domain.CompleteSession(&s, now); ev != nil || err != nil {
		t.Fatalf("completed twice: %v %v", ev, err)
	}
	if ev, err := domain.FailPayroll(&s, "error", now); ev != nil || err != nil {
		t.Fatalf("a late failure moved a completed session: %v %v", ev, err)
	}
	if _, err := domain.StartSwitch(&s, en, "", now); err == nil {
		t.Fatal("the widget opened on a completed session")
	}
}

// A session waits for the vendor's word on a switch the donor started past
// its own expiry, for PayrollWait after the last opening, and no longer; a
// session whose switch was refused expires on time.
func TestPayrollSwitchDefersExpiry(t *testing.T) {
	now := time.Now()
	s := atPayroll(t, now)
	if !s.Deadline().Equal(s.ExpiresAt) {
		t.Fatalf("deadline %v before the widget, want %v", s.Deadline(), s.ExpiresAt)
	}
	opened := now.Add(domain.SessionLifetime - time.Minute)
	ev, err := domain.StartSwitch(&s, domain.NewID(domain.PrefixEnrollment), "", opened)
	apply(t, &s, ev, err)
	if want := opened.Truncate(time.Millisecond).Add(domain.PayrollWait); !s.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", s.Deadline(), want)
	}
	if late := s.ExpiresAt.Add(time.Hour); s.Step(late) != domain.StepPayroll || domain.Expire(&s, late) != nil {
		t.Fatalf("a waiting switch's session expired an hour past its url")
	}
	if past := s.Deadline().Add(time.Second); s.Step(past) != domain.StepExpired || domain.Expire(&s, past) == nil {
		t.Fatal("the session outlived PayrollWait")
	}
	ev, err = domain.FailPayroll(&s, "login_error", opened)
	apply(t, &s, ev, err)
	if !s.Deadline().Equal(s.ExpiresAt) {
		t.Fatalf("a refused switch still defers the expiry: %v", s.Deadline())
	}
}
