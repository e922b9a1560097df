package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// A donor at the identity step with no decision may be sent to the vendor,
// and again (a new verification replaces the last); recording the same
// verification twice changes nothing; before consent, once decided, or
// after the session closed, it is refused.
func TestStartIdentity(t *testing.T) {
	now := time.Now()
	atIdentity := func() domain.Session {
		var s domain.Session
		created, err := domain.CreateSession(&s, domain.NewSession{ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1"}, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(created)
		step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.SendCode(s, now) })
		step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.CheckCode(s, true, now) })
		return s
	}
	consent := func(s *domain.Session) {
		step(t, s, func(s *domain.Session) (*domain.Event, error) {
			return domain.Consent(s, domain.ConsentTerms{Church: "Grace", Partner: "Acme"}, "", now)
		})
	}

	s := atIdentity()
	if _, err := domain.StartIdentity(&s, "vs_1", now); !errors.Is(err, domain.ErrWrongStep) {
		t.Fatalf("before consent: %v, want ErrWrongStep", err)
	}
	consent(&s)
	if _, err := domain.StartIdentity(&s, "", now); err == nil {
		t.Fatal("a verification without an id was recorded")
	}
	ev := step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.StartIdentity(s, "vs_1", now) })
	if ev == nil || ev.Type != "donor_session.identity_started" || s.Identity != "vs_1" || s.Step(now) != domain.StepKYC {
		t.Fatalf("started: %+v, identity %q, step %s", ev, s.Identity, s.Step(now))
	}
	if ev, err := domain.StartIdentity(&s, "vs_1", now); ev != nil || err != nil {
		t.Fatalf("the same verification again: %v %v, want no change", ev, err)
	}
	step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.StartIdentity(s, "vs_2", now) })
	if s.Identity != "vs_2" {
		t.Fatalf("a new verification: %q", s.Identity)
	}
	step(t, &s, func(s *domain.Session) (*domain.Event, error) {
		return domain.DecideKYC(s, domain.KYCReview, "vendor", now)
	})
	if _, err := domain.StartIdentity(&s, "vs_3", now); !errors.Is(err, domain.ErrWrongStep) {
		t.Fatalf("in review: %v, want ErrWrongStep", err)
	}

	late := atIdentity()
	consent(&late)
	if _, err := domain.StartIdentity(&late, "vs_1", now.Add(domain.SessionLifetime)); !errors.Is(err, domain.ErrSessionClosed) {
		t.Fatalf("after expiry: %v, want ErrSessionClosed", err)
	}
}
