package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// flowToken opens a donor session at a church of its own and returns the
// url's token.
func (in *instance) flowToken(t testing.TB) (string, domain.Session) {
	t.Helper()
	ctx := context.Background()
	p := in.partner(t)
	created, err := in.App.CreateSession(ctx, p, sessionRequest(in.church(t, p).ID))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(created.URL, in.App.PublicURL()+"/flow/"), created.Session
}

// show is what a visit shows, once this instance's writes are applied
// (the transport waits for them before every page).
func (in *instance) show(t testing.TB, v app.FlowVisit) app.FlowPage {
	t.Helper()
	ctx := context.Background()
	if err := in.App.SeeWrites(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := in.App.ShowFlowPage(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// The first browser to open a session's url is bound to it; any other is
// shown the "already used" page, and only the bound one may post forms.
// Tokens that are not the service's find nothing.
func TestFlowPageBindsTheFirstBrowser(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	token, sess := in.flowToken(t)
	now := time.Now()

	for name, v := range map[string]app.FlowVisit{
		"a malformed token":     {Token: "nope", Now: now},
		"a token of the length": {Token: strings.Repeat("A", len(token)), Now: now},
	} {
		if page := in.show(t, v); page.Kind != app.FlowNotFound {
			t.Errorf("%s: %v, want not found", name, page.Kind)
		}
	}

	first := in.show(t, app.FlowVisit{Token: token, Now: now})
	if first.Kind != app.FlowStep || !first.Bound || first.Secret == "" || first.Session.ID != sess.ID {
		t.Fatalf("first visit: kind %v bound %v secret %q session %s", first.Kind, first.Bound, first.Secret, first.Session.ID)
	}
	if first.Step != domain.StepVerifyPhone || first.PhoneEnding != "23" || first.Church == "" || !first.Sandbox {
		t.Fatalf("first page: step %s phone %q church %q sandbox %v", first.Step, first.PhoneEnding, first.Church, first.Sandbox)
	}
	again := in.show(t, app.FlowVisit{Token: token, Held: first.Secret, Now: now})
	if again.Kind != app.FlowStep || again.Bound || again.Secret != first.Secret {
		t.Fatalf("the bound browser again: kind %v bound %v", again.Kind, again.Bound)
	}
	for name, held := range map[string]string{"no cookie": "", "another's cookie": "another-browsers-secret"} {
		if page := in.show(t, app.FlowVisit{Token: token, Held: held, Now: now}); page.Kind != app.FlowUsed || page.Church != first.Church {
			t.Errorf("%s: %v (church %q), want the used page naming the church", name, page.Kind, page.Church)
		}
		form, err := in.App.OpenFlowForm(ctx, app.FlowVisit{Token: token, Held: held, Now: now})
		if err != nil || form.Kind != app.FlowUsed {
			t.Errorf("%s posting a form: %v %v, want the used page", name, form.Kind, err)
		}
	}
	form, err := in.App.OpenFlowForm(ctx, app.FlowVisit{Token: token, Held: first.Secret, Now: now})
	if err != nil || form.Kind != app.FlowStep || form.Session.ID != sess.ID || form.Secret != first.Secret {
		t.Fatalf("the bound browser posting: %v %v", form.Kind, err)
	}
	if widget, err := in.App.ShowPayrollWidget(ctx, app.FlowVisit{Token: token, Held: first.Secret, Now: now}); err != nil || widget.Kind != app.FlowBack {
		t.Fatalf("the widget before the payroll step: %v %v, want back to the flow", widget.Kind, err)
	}
}

// Each form's answer, walked through the steps in order: what the donor
// can mend is a message, a form whose step is not the session's changes
// nothing, and each step's page shows what it needs.
func TestSubmitFlowStep(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	token, _ := in.flowToken(t)
	now := time.Now()
	bound := in.show(t, app.FlowVisit{Token: token, Now: now})
	visit := app.FlowVisit{Token: token, Held: bound.Secret, Now: now}

	for _, tc := range []struct {
		name string
		sub  app.FlowSubmission
		want app.FlowAnswer
		step domain.FlowStep // the step shown afterwards
	}{
		{"a code of letters", app.FlowSubmission{Form: app.FormCheckCode, Code: "abcdef"}, app.FlowAnswer{Message: domain.FlowCodeFormat.Code}, domain.StepVerifyPhone},
		{"consent before the phone", app.FlowSubmission{Form: app.FormConsent, ConsentVersion: domain.ConsentVersion, GiftAgreed: true, TermsAgreed: true}, app.FlowAnswer{}, domain.StepVerifyPhone},
		{"send the code", app.FlowSubmission{Form: app.FormSendCode}, app.FlowAnswer{}, domain.StepVerifyPhone},
		{"a wrong code", app.FlowSubmission{Form: app.FormCheckCode, Code: "111111"}, app.FlowAnswer{Message: domain.FlowCodeWrong.Code}, domain.StepVerifyPhone},
		{"the code, spaced", app.FlowSubmission{Form: app.FormCheckCode, Code: "000 000"}, app.FlowAnswer{}, domain.StepConsent},
		{"the payroll before consent", app.FlowSubmission{Form: app.FormPayroll}, app.FlowAnswer{}, domain.StepConsent},
		{"an older consent text", app.FlowSubmission{Form: app.FormConsent, ConsentVersion: "0", GiftAgreed: true, TermsAgreed: true}, app.FlowAnswer{Message: domain.FlowConsentChanged.Code}, domain.StepConsent},
		{"one box left empty", app.FlowSubmission{Form: app.FormConsent, ConsentVersion: domain.ConsentVersion, GiftAgreed: true}, app.FlowAnswer{Message: domain.FlowConsentMissing.Code}, domain.StepConsent},
		{"consent", app.FlowSubmission{Form: app.FormConsent, ConsentVersion: domain.ConsentVersion, GiftAgreed: true, TermsAgreed: true}, app.FlowAnswer{}, domain.StepKYC},
	} {
		form, err := in.App.OpenFlowForm(ctx, visit)
		if err != nil || form.Kind != app.FlowStep {
			t.Fatalf("%s: open the form: %v %v", tc.name, form.Kind, err)
		}
		got, err := in.App.SubmitFlowStep(ctx, form.Session, tc.sub, now)
		if err != nil || got != tc.want {
			t.Fatalf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
		if page := in.show(t, visit); page.Kind != app.FlowStep || page.Step != tc.step {
			t.Fatalf("%s: then the page shows %v step %s, want step %s", tc.name, page.Kind, page.Step, tc.step)
		}
	}

	page := in.show(t, visit)
	if page.Identity != app.IdentityToStart || page.IdentityOrigin != "" {
		t.Fatalf("identity step: stage %v origin %q, want to start on this service's stand-in", page.Identity, page.IdentityOrigin)
	}
	got, err := in.App.SubmitFlowStep(ctx, page.Session, app.FlowSubmission{Form: app.FormIdentity}, now)
	if err != nil || !strings.HasPrefix(got.IdentityPage, in.App.PublicURL()+"/standin/stripe/identity/") {
		t.Fatalf("start identity: %+v %v, want the stand-in's page", got, err)
	}
	if page := in.show(t, visit); page.Identity != app.IdentityChecking {
		t.Fatalf("after starting: stage %v, want checking", page.Identity)
	}
}

// Past its expiry a session's url shows the expired page, to any browser,
// and its forms change nothing.
func TestFlowPageAfterExpiry(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	token, sess := in.flowToken(t)
	bound := in.show(t, app.FlowVisit{Token: token, Now: time.Now()})
	later := sess.ExpiresAt.Add(time.Second)
	for name, held := range map[string]string{"the bound browser": bound.Secret, "another": ""} {
		if page := in.show(t, app.FlowVisit{Token: token, Held: held, Now: later}); page.Kind != app.FlowExpired || page.Church == "" {
			t.Errorf("%s: %v (church %q), want the expired page naming the church", name, page.Kind, page.Church)
		}
	}
	got, err := in.App.SubmitFlowStep(ctx, bound.Session, app.FlowSubmission{Form: app.FormSendCode}, later)
	if err != nil || got != (app.FlowAnswer{}) {
		t.Fatalf("a form after expiry: %+v %v, want nothing", got, err)
	}
	if n := in.events(t, bound.Session.PartnerID, sess.ID, "donor_session.code_sent"); n != 0 {
		t.Fatalf("%d codes sent after expiry", n)
	}
}
