package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

func TestSimulators(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()

	t.Run("payroll confirms a pending enrollment once", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		id := in.enrollment(t, p, c.ID, domain.EnrollmentPending)
		for i := range 2 {
			a, err := in.App.SimulatePayrollConnected(ctx, p, id, c.ID)
			if err != nil || a.StatusCode != http.StatusOK {
				t.Fatalf("confirmation %d: %d %s %v", i, a.StatusCode, a.Problem, err)
			}
		}
		waitFor(t, "the enrollment to become active", func() bool {
			e, err := in.App.Enrollment(p, id)
			return err == nil && e.Status == domain.EnrollmentActive
		})
		if n := in.events(t, p, id, "enrollment.activated"); n != 1 {
			t.Errorf("%d enrollment.activated, want 1", n)
		}
	})

	t.Run("payroll ends an enrollment for a known reason only", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		id := in.enrollment(t, p, c.ID, domain.EnrollmentActive)
		var de *domain.Error
		if _, err := in.App.SimulatePayrollEnded(ctx, p, id, c.ID, "bored"); !errors.As(err, &de) || de.Kind != domain.KindInvalid {
			t.Fatalf("an unknown reason: %v, want a refusal", err)
		}
		// The payroll vendor reports no end of employment.
		if _, err := in.App.SimulatePayrollEnded(ctx, p, id, c.ID, domain.EndLeftEmployer); err == nil {
			t.Fatal("left_employer was simulated: the payroll vendor has no webhook for it")
		}
		a, err := in.App.SimulatePayrollEnded(ctx, p, id, c.ID, domain.EndSwitchReverted)
		if err != nil || a.StatusCode != http.StatusOK {
			t.Fatalf("switch reverted: %d %s %v", a.StatusCode, a.Problem, err)
		}
		waitFor(t, "the enrollment to end", func() bool {
			e, err := in.App.Enrollment(p, id)
			return err == nil && e.Status == domain.EnrollmentEnded
		})
	})

	t.Run("a deposit is credited once per trace", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		d := app.SimulatedDeposit{ChurchID: c.ID, AccountRef: "acct_1", Amount: json.RawMessage("12.34"), Trace: "trace-" + p}
		first, err := in.App.SimulateDeposit(ctx, p, d)
		if err != nil || first.StatusCode != http.StatusOK || first.Trace != d.Trace {
			t.Fatalf("deposit: %+v %v", first, err)
		}
		again, err := in.App.SimulateDeposit(ctx, p, d)
		if err != nil || again.BankTS != first.BankTS {
			t.Fatalf("the same trace again: %+v %v, want the first bank timestamp %s", again, err, first.BankTS)
		}
		if n := in.events(t, p, domain.DepositBook, "deposit.received"); n != 1 {
			t.Errorf("%d deposit.received, want 1", n)
		}
		bad := d
		bad.Trace, bad.Amount = "trace-bad-"+p, json.RawMessage("-1")
		a, err := in.App.SimulateDeposit(ctx, p, bad)
		if err != nil || a.StatusCode/100 != 4 {
			t.Errorf("a negative amount: %d %v, want the edge's refusal", a.StatusCode, err)
		}
	})

	t.Run("identity decisions need a session waiting for one", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		c := in.church(t, p)
		s, err := in.App.CreateSession(ctx, p, sessionRequest(c.ID))
		if err != nil {
			t.Fatal(err)
		}
		a, err := in.App.SimulateKYC(ctx, p, c.ID, s.Session.DonorID, "passed")
		if err != nil || a.StatusCode != http.StatusConflict {
			t.Errorf("no session waits: %d %s %v, want 409", a.StatusCode, a.Problem, err)
		}
		// The vendor's webhook has no way to say another outcome: none is
		// sent.
		_, err = in.App.SimulateKYC(ctx, p, c.ID, s.Session.DonorID, "maybe")
		wantProblem(t, err, domain.ProblemValidation.Code)
	})

	t.Run("another partner's church is not found", func(t *testing.T) {
		t.Parallel()
		owner, other := in.partner(t), in.partner(t)
		c := in.church(t, owner)
		_, err := in.App.SimulateDeposit(ctx, other, app.SimulatedDeposit{ChurchID: c.ID, AccountRef: "a", Amount: json.RawMessage("1")})
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.SimulatePayrollConnected(ctx, other, domain.NewID(domain.PrefixEnrollment), c.ID)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.SimulateKYC(ctx, other, c.ID, "donor", "passed")
		wantProblem(t, err, domain.ProblemNotFound.Code)
	})
}
