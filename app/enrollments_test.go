package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// move is one of the partner's moves on an enrollment.
type move struct {
	event string // the public event it appends
	do    func(in *instance, partner, id string) (app.Enrollment, error)
}

var moves = map[string]move{
	"pause": {"enrollment.paused", func(in *instance, p, id string) (app.Enrollment, error) {
		return in.App.PauseEnrollment(context.Background(), p, id)
	}},
	"resume": {"enrollment.resumed", func(in *instance, p, id string) (app.Enrollment, error) {
		return in.App.ResumeEnrollment(context.Background(), p, id)
	}},
	"cancel": {"enrollment.canceled", func(in *instance, p, id string) (app.Enrollment, error) {
		return in.App.CancelEnrollment(context.Background(), p, id, nil)
	}},
	"lower": {"enrollment.updated", func(in *instance, p, id string) (app.Enrollment, error) {
		return in.App.UpdateEnrollment(context.Background(), p, id, json.RawMessage("1.25"))
	}},
	"raise": {"enrollment.update_requested", func(in *instance, p, id string) (app.Enrollment, error) {
		return in.App.UpdateEnrollment(context.Background(), p, id, json.RawMessage("7"))
	}},
}

func TestMoveEnrollment(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	const (
		pending  = domain.EnrollmentPending
		active   = domain.EnrollmentActive
		paused   = domain.EnrollmentPaused
		consent  = domain.EnrollmentPendingConsent
		canceled = domain.EnrollmentCanceled
		ended    = domain.EnrollmentEnded
	)
	refused := domain.ProblemInvalidTransition.Code
	for _, tc := range []struct {
		from  domain.EnrollmentStatus
		move  string
		to    domain.EnrollmentStatus // the status afterwards
		code  domain.Code             // the refusal, if refused
		quiet bool                    // nothing appended: already there
	}{
		{from: active, move: "pause", to: paused},
		{from: paused, move: "pause", to: paused, quiet: true},
		{from: pending, move: "pause", to: pending, code: refused},
		{from: consent, move: "pause", to: consent, code: refused},
		{from: canceled, move: "pause", to: canceled, code: refused},
		{from: ended, move: "pause", to: ended, code: refused},

		{from: paused, move: "resume", to: active},
		{from: active, move: "resume", to: active, quiet: true},
		{from: pending, move: "resume", to: pending, code: refused},
		{from: canceled, move: "resume", to: canceled, code: refused},

		{from: pending, move: "cancel", to: canceled},
		{from: active, move: "cancel", to: canceled},
		{from: paused, move: "cancel", to: canceled},
		{from: consent, move: "cancel", to: canceled},
		{from: canceled, move: "cancel", to: canceled, quiet: true},
		{from: ended, move: "cancel", to: ended, code: refused},

		{from: pending, move: "lower", to: pending},
		{from: active, move: "lower", to: active},
		{from: paused, move: "lower", to: paused},
		{from: consent, move: "lower", to: consent, code: refused},
		{from: canceled, move: "lower", to: canceled, code: refused},
		{from: ended, move: "lower", to: ended, code: refused},

		{from: active, move: "raise", to: consent},
		{from: paused, move: "raise", to: consent},
		{from: canceled, move: "raise", to: canceled, code: refused},
	} {
		t.Run(tc.move+" "+string(tc.from), func(t *testing.T) {
			t.Parallel()
			p := in.partner(t)
			id := in.enrollment(t, p, in.church(t, p).ID, tc.from)
			m := moves[tc.move]
			before := in.events(t, p, id, m.event)
			got, err := m.do(in, p, id)
			wantProblem(t, err, tc.code)
			if err != nil && !strings.Contains(err.Error(), string(tc.from)) {
				t.Errorf("the refusal does not name the status %s: %v", tc.from, err)
			}
			if err == nil && got.Status != tc.to {
				t.Errorf("answered %s, want %s", got.Status, tc.to)
			}
			read, err := in.App.Enrollment(p, id)
			if err != nil || read.Status != tc.to {
				t.Errorf("reads %s %v, want %s", read.Status, err, tc.to)
			}
			appended := in.events(t, p, id, m.event) - before
			if want := map[bool]int{true: 1}[tc.code == "" && !tc.quiet]; appended != want {
				t.Errorf("%d %s appended, want %d", appended, m.event, want)
			}
		})
	}

	t.Run("a lower value applies at once, a raise waits for the donor", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		id := in.enrollment(t, p, in.church(t, p).ID, active)
		lower, err := in.App.UpdateEnrollment(ctx, p, id, json.RawMessage("1.5"))
		if err != nil || lower.Giving.Value != 1_50 || lower.ConsentURL != "" {
			t.Fatalf("lower: value %d consent url %q %v", lower.Giving.Value, lower.ConsentURL, err)
		}
		same, err := in.App.UpdateEnrollment(ctx, p, id, json.RawMessage("1.50"))
		if err != nil || same.Giving.Value != 1_50 || in.events(t, p, id, "enrollment.updated") != 1 {
			t.Fatalf("the same value again: %d %v", same.Giving.Value, err)
		}
		raise, err := in.App.UpdateEnrollment(ctx, p, id, json.RawMessage("6"))
		if err != nil {
			t.Fatal(err)
		}
		if raise.Giving.Value != 1_50 || raise.Pending == nil || raise.Pending.Value != 6_00 {
			t.Errorf("raise: value %d pending %+v, want 150 waiting for 600", raise.Giving.Value, raise.Pending)
		}
		if !strings.HasPrefix(raise.ConsentURL, in.App.PublicURL()+"/flow/") {
			t.Errorf("raise: consent url %q", raise.ConsentURL)
		}
		read, _ := in.App.Enrollment(p, id)
		if read.ConsentURL != "" {
			t.Error("a read shows the consent url, which is shown once")
		}
	})

	t.Run("values out of the mode's range are refused", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		id := in.enrollment(t, p, in.church(t, p).ID, active)
		for _, v := range []string{"0", "-1", "101", `"2"`, "2.555"} {
			_, err := in.App.UpdateEnrollment(ctx, p, id, json.RawMessage(v))
			wantProblem(t, err, domain.ProblemValidation.Code)
		}
		if n := in.events(t, p, id, "enrollment.updated") + in.events(t, p, id, "enrollment.update_requested"); n != 0 {
			t.Errorf("%d updates appended by refused values", n)
		}
	})

	t.Run("a cancel keeps its reason for the partner alone", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		id := in.enrollment(t, p, in.church(t, p).ID, active)
		_, err := in.App.CancelEnrollment(ctx, p, id, ptr(strings.Repeat("x", domain.MaxCancelReason+1)))
		wantProblem(t, err, domain.ProblemValidation.Code)
		got, err := in.App.CancelEnrollment(ctx, p, id, ptr("Moved away"))
		if err != nil || got.Status != canceled || got.CancelReason != "Moved away" {
			t.Fatalf("cancel: %s %q %v", got.Status, got.CancelReason, err)
		}
		again, err := in.App.CancelEnrollment(ctx, p, id, ptr("Another reason"))
		if err != nil || again.CancelReason != "Moved away" {
			t.Fatalf("cancel again: %q %v, want the first reason kept", again.CancelReason, err)
		}
		// The reason is sealed: the ledger never holds its text.
		recs, _, err := in.Ledger.Read(ctx, in.Ledger.Subjects().Aggregate(p, id), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if strings.Contains(string(r.Data), "Moved away") {
				t.Errorf("the ledger holds the reason in clear: %s", r.Data)
			}
		}
	})

	t.Run("another partner's enrollment is not found", func(t *testing.T) {
		t.Parallel()
		owner, other := in.partner(t), in.partner(t)
		id := in.enrollment(t, owner, in.church(t, owner).ID, active)
		for name, m := range moves {
			if _, err := m.do(in, other, id); err == nil {
				t.Errorf("%s by another partner: no error", name)
			} else {
				wantProblem(t, err, domain.ProblemNotFound.Code)
			}
		}
		_, err := in.App.Enrollment(other, id)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		if got, _ := in.App.Enrollment(owner, id); got.Status != active {
			t.Errorf("the owner's enrollment is %s", got.Status)
		}
	})

	t.Run("an id that is not an enrollment's is not found", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		for name, m := range moves {
			if _, err := m.do(in, p, "enr_nope"); err == nil {
				t.Errorf("%s: no error", name)
			} else {
				wantProblem(t, err, domain.ProblemNotFound.Code)
			}
		}
	})
}
