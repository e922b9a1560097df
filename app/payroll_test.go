package app_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// atPayroll opens a donor session at the partner's church and moves it
// through every step before payroll, as the flow's decisions would.
func (in *instance) atPayroll(t testing.TB, partner, church string) domain.Session {
	t.Helper()
	sess, err := in.App.CreateSession(context.Background(), partner, sessionRequest(church))
	if err != nil {
		t.Fatalf("open a donor session: %v", err)
	}
	id := sess.Session.ID
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
		in.execute(t, partner, id, func(h eventlog.History) (*domain.Event, error) {
			cur := domain.Fold[domain.Session](h.Events)
			return step(&cur, time.Now())
		})
	}
	in.catchUp(t)
	return in.session(t, partner, id)
}

// session reads a session as the ledger holds it.
func (in *instance) session(t testing.TB, partner, id string) domain.Session {
	t.Helper()
	h, err := in.Ledger.History(context.Background(), partner, id)
	if err != nil {
		t.Fatal(err)
	}
	return domain.Fold[domain.Session](h.Events)
}

// report hands the use cases one payroll vendor webhook, as the edge does.
func (in *instance) report(t testing.TB, id string, r app.PayrollReport) (bool, error) {
	t.Helper()
	return in.App.ReceiveVendorEvent(context.Background(), app.VendorEvent{Kind: "payroll", ID: id, Payroll: &r})
}

func TestPayrollSwitch(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()

	t.Run("opening the widget names one enrollment, however often", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		s := in.atPayroll(t, p, c.ID)
		if s.Payroll() != domain.PayrollNotStarted {
			t.Fatalf("payroll state %s before the widget opened", s.Payroll())
		}
		first, err := in.App.StartPayroll(ctx, s, time.Now())
		if err != nil || first == "" {
			t.Fatalf("open the widget: %q %v", first, err)
		}
		opened := in.session(t, p, s.ID)
		second, err := in.App.StartPayroll(ctx, opened, time.Now())
		if err != nil || second == first {
			t.Fatalf("open it again: %q %v, want a fresh token", second, err)
		}
		again := in.session(t, p, s.ID)
		if !domain.ValidID(domain.PrefixEnrollment, again.SwitchEnrollment) || again.SwitchEnrollment != opened.SwitchEnrollment ||
			again.VendorUser == "" || again.VendorUser != opened.VendorUser || again.SwitchStarts != 2 || again.Payroll() != domain.PayrollWaiting {
			t.Fatalf("after two openings: %+v", again)
		}
		// A session past the payroll step opens nothing.
		if _, err := in.App.StartPayroll(ctx, in.submittedSwitch(t), time.Now()); err != domain.ErrWrongStep {
			t.Fatalf("a completed session opened the widget: %v", err)
		}
	})

	t.Run("the vendor's outcomes move the switch once each", func(t *testing.T) {
		t.Parallel()
		p, _, s, en := in.openedSwitch(t)
		changed, err := in.report(t, "fail-1", app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchFailed, Reason: "login_error"})
		if refused := in.session(t, p, s.ID); err != nil || !changed || refused.Payroll() != domain.PayrollRefused {
			t.Fatalf("a failure: %v %v %s", changed, err, refused.Payroll())
		}
		for i := range 2 {
			changed, err := in.report(t, "submitted-1", app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchSubmitted})
			if err != nil || changed != (i == 0) {
				t.Fatalf("submission %d: %v %v", i, changed, err)
			}
		}
		done := in.session(t, p, s.ID)
		if done.Status != domain.SessionCompleted || done.EnrollmentID != en {
			t.Fatalf("after the submission: %+v", done)
		}
		for _, id := range []string{"done-1", "done-1", "done-2"} {
			if _, err := in.report(t, id, app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchConfirmed}); err != nil {
				t.Fatalf("confirmation %s: %v", id, err)
			}
		}
		if n := in.events(t, p, en, "enrollment.created"); n != 1 {
			t.Errorf("%d enrollment.created, want 1", n)
		}
		if n := in.events(t, p, en, "enrollment.activated"); n != 1 {
			t.Errorf("%d enrollment.activated, want 1", n)
		}
		if _, err := in.report(t, "deleted-1", app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchReverted}); err != nil {
			t.Fatal(err)
		}
		if n := in.events(t, p, en, "enrollment.ended"); n != 1 {
			t.Errorf("%d enrollment.ended, want 1", n)
		}
	})

	t.Run("a confirmation whose submission was lost creates the enrollment first", func(t *testing.T) {
		t.Parallel()
		p, _, _, en := in.openedSwitch(t)
		if _, err := in.report(t, "done-only", app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchConfirmed}); err != nil {
			t.Fatal(err)
		}
		if in.events(t, p, en, "enrollment.created") != 1 || in.events(t, p, en, "enrollment.activated") != 1 {
			t.Fatal("a lone confirmation did not create and activate the enrollment")
		}
	})

	t.Run("a reference no switch names is refused", func(t *testing.T) {
		t.Parallel()
		for _, ref := range []string{domain.NewID(domain.PrefixEnrollment), "applicant-7", ""} {
			_, err := in.report(t, "unknown-"+ref, app.PayrollReport{EnrollmentID: ref, Outcome: app.SwitchConfirmed})
			wantProblem(t, err, domain.ProblemUnknownReference.Code)
		}
	})

	t.Run("a switch the donor started keeps the session open past its expiry", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		s := in.atPayroll(t, p, c.ID)
		if _, err := in.App.StartPayroll(ctx, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		waiting := in.session(t, p, s.ID)
		late := waiting.ExpiresAt.Add(time.Hour)
		if waiting.Step(late) != domain.StepPayroll || domain.Expire(&waiting, late) != nil {
			t.Fatalf("a waiting switch's session expired an hour after its url: %s", waiting.Step(late))
		}
		if after := waiting.SwitchStartedAt.Add(domain.PayrollWait + time.Second); waiting.Step(after) != domain.StepExpired {
			t.Fatalf("the session still waits past %s", domain.PayrollWait)
		}
	})

	t.Run("the sandbox's Truv stand-in submits the switch through the edge", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		s := in.atPayroll(t, p, c.ID)
		token, err := in.App.StartPayroll(ctx, s, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		widget := in.App.PayrollWidget()
		if !strings.HasSuffix(widget.ScriptURL, "/standin/truv/bridge.js") || len(widget.Origins) != 1 || !strings.HasPrefix(widget.ScriptURL, widget.Origins[0]) {
			t.Fatalf("the sandbox's widget: %+v", widget)
		}
		resp, err := http.PostForm(strings.TrimSuffix(widget.ScriptURL, "/bridge.js")+"/bridge/"+url.PathEscape(token), url.Values{"username": {"user_good"}, "password": {"x"}})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("sign in to the stand-in: %v %v", resp, err)
		}
		resp.Body.Close()
		en := in.session(t, p, s.ID).SwitchEnrollment
		waitFor(t, "the enrollment", func() bool { return in.events(t, p, en, "enrollment.created") == 1 })
		// The sandbox holds the confirmation back for the simulator.
		if n := in.events(t, p, en, "enrollment.activated"); n != 0 {
			t.Fatalf("%d enrollment.activated before payroll-connected", n)
		}
		a, err := in.App.SimulatePayrollConnected(ctx, p, en, c.ID)
		if err != nil || a.StatusCode != http.StatusOK {
			t.Fatalf("payroll-connected: %+v %v", a, err)
		}
		if n := in.events(t, p, en, "enrollment.activated"); n != 1 {
			t.Fatalf("%d enrollment.activated", n)
		}
	})
}

// openedSwitch is a new partner's church and a session whose donor opened
// the payroll widget, with the enrollment the switch names, applied by the
// projections.
func (in *instance) openedSwitch(t testing.TB) (partner string, church domain.Church, s domain.Session, enrollment string) {
	t.Helper()
	partner = in.partner(t)
	church = in.church(t, partner)
	s = in.atPayroll(t, partner, church.ID)
	if _, err := in.App.StartPayroll(context.Background(), s, time.Now()); err != nil {
		t.Fatal(err)
	}
	enrollment = in.session(t, partner, s.ID).SwitchEnrollment
	in.catchUp(t)
	return partner, church, s, enrollment
}

// submittedSwitch is a session whose switch the vendor submitted.
func (in *instance) submittedSwitch(t testing.TB) domain.Session {
	t.Helper()
	partner, _, s, en := in.openedSwitch(t)
	if _, err := in.report(t, "submitted-"+en, app.PayrollReport{EnrollmentID: en, Outcome: app.SwitchSubmitted}); err != nil {
		t.Fatal(err)
	}
	return in.session(t, partner, s.ID)
}
