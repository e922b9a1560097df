package app_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The identity step's use cases on the sandbox, whose identity vendor is
// the built-in stand-in: a donor who consented is sent to the stand-in's
// page and the session records the verification; once there, the donor
// waits (the stand-in keeps nothing to say otherwise) and is not sent
// again; the vendor's webhook then decides. Before consent it is the wrong
// step.
func TestStartIdentity(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	p := in.partner(t)
	c := in.church(t, p)
	created, err := in.App.CreateSession(ctx, p, sessionRequest(c.ID))
	if err != nil {
		t.Fatal(err)
	}
	sess := created.Session
	now := time.Now()
	if _, err := in.App.StartIdentity(ctx, sess, now); !errors.Is(err, domain.ErrWrongStep) {
		t.Fatalf("before the phone and consent: %v, want ErrWrongStep", err)
	}
	if err := in.App.SendCode(ctx, sess, now); err != nil {
		t.Fatal(err)
	}
	if res, err := in.App.CheckCode(ctx, in.session(t, p, sess.ID), "000000", now); err != nil || !res.Correct {
		t.Fatalf("code: %+v %v", res, err)
	}
	if err := in.App.Consent(ctx, in.session(t, p, sess.ID), "", now); err != nil {
		t.Fatal(err)
	}
	sess = in.session(t, p, sess.ID)
	if got := in.App.IdentityStage(ctx, sess); got != app.IdentityToStart {
		t.Fatalf("after consent: stage %v, want to start", got)
	}

	page, err := in.App.StartIdentity(ctx, sess, now)
	if err != nil || !strings.HasPrefix(page, in.App.PublicURL()+"/standin/stripe/identity/") {
		t.Fatalf("start: %q %v, want the stand-in's page", page, err)
	}
	sess = in.session(t, p, sess.ID)
	if !strings.HasPrefix(sess.Identity, "vs_") || in.App.IdentityStage(ctx, sess) != app.IdentityChecking {
		t.Fatalf("after start: identity %q, stage %v", sess.Identity, in.App.IdentityStage(ctx, sess))
	}
	if again, err := in.App.StartIdentity(ctx, sess, now); again != "" || err != nil {
		t.Fatalf("start again while waiting: %q %v, want the wait", again, err)
	}
	if after := in.session(t, p, sess.ID); after.Identity != sess.Identity {
		t.Fatalf("start again recorded %q over %q", after.Identity, sess.Identity)
	}

	a, err := in.App.SimulateKYC(ctx, p, c.ID, sess.DonorID, domain.KYCPassed)
	if err != nil || a.StatusCode != http.StatusOK {
		t.Fatalf("the vendor's decision: %d %s %v", a.StatusCode, a.Problem, err)
	}
	sess = in.session(t, p, sess.ID)
	if sess.Step(time.Now()) != domain.StepPayroll {
		t.Fatalf("after the decision: %s", sess.Step(time.Now()))
	}
	if _, err := in.App.StartIdentity(ctx, sess, time.Now()); !errors.Is(err, domain.ErrWrongStep) {
		t.Fatalf("once decided: %v, want ErrWrongStep", err)
	}
}
