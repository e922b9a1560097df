package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// The first browser binds the session with a fresh secret; the browser that
// holds it is recognised, by the secret it presents, on any instance; no
// other browser, nor a secret a browser chose itself, gets in.
func TestBindRecognisesTheBoundBrowser(t *testing.T) {
	now := time.Now()
	var s domain.Session
	created, err := domain.CreateSession(&s, domain.NewSession{ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(created)

	// A secret the browser brings never creates the binding.
	ev, err := domain.Bind(&s, "chosen-by-the-browser", "fresh", now)
	if err != nil || ev == nil {
		t.Fatalf("first bind: %v %v", ev, err)
	}
	if got := ev.Payload.(*domain.SessionOpened).BindingHash; got != "fresh" {
		t.Fatalf("bound with %q, want the fresh secret", got)
	}
	s.Apply(*ev)

	if ev, err := domain.Bind(&s, "fresh", "another", now); err != nil || ev != nil {
		t.Fatalf("the bound browser again: %v %v; want no change", ev, err)
	}
	for _, held := range []string{"", "another", "chosen-by-the-browser"} {
		if _, err := domain.Bind(&s, held, "another", now); !errors.Is(err, domain.ErrLinkUsed) {
			t.Fatalf("browser holding %q: %v; want ErrLinkUsed", held, err)
		}
	}

	var late domain.Session
	late.Apply(created)
	if _, err := domain.Bind(&late, "", "fresh", now.Add(domain.SessionLifetime)); !errors.Is(err, domain.ErrSessionClosed) {
		t.Fatalf("bind after expiry: %v", err)
	}
}

// step runs one decision on s and applies its event.
func step(t *testing.T, s *domain.Session, decide func(*domain.Session) (*domain.Event, error)) *domain.Event {
	t.Helper()
	ev, err := decide(s)
	if err != nil {
		t.Fatal(err)
	}
	if ev != nil {
		s.Apply(*ev)
	}
	return ev
}

// A failed identity check and a lockout are public events naming the
// session; a re-consent session's lockout and expiry are internal.
func TestSessionOutcomesArePublic(t *testing.T) {
	now := time.Now()
	open := func(purpose domain.SessionPurpose) *domain.Session {
		var s domain.Session
		created, err := domain.CreateSession(&s, domain.NewSession{ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1", Purpose: purpose}, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(created)
		step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.SendCode(s, now) })
		return &s
	}
	public := func(ev *domain.Event) bool {
		spec, _ := domain.EventTypeSpec(ev.Type)
		return spec.Public
	}

	s := open(domain.SessionPurposeEnroll)
	step(t, s, func(s *domain.Session) (*domain.Event, error) { return domain.CheckCode(s, true, now) })
	step(t, s, func(s *domain.Session) (*domain.Event, error) { return domain.Consent(s, graceTerms, "", now) })
	ev := step(t, s, func(s *domain.Session) (*domain.Event, error) {
		return domain.DecideKYC(s, domain.KYCFailed, "vendor", now)
	})
	if ev.Type != "donor_session.declined" || !public(ev) || ev.Payload.(*domain.DonorSessionDeclined).DonorSessionID != s.ID {
		t.Fatalf("decline: %+v", ev)
	}
	if s.Status != domain.SessionDeclined || s.Step(now) != domain.StepDeclined {
		t.Fatalf("after decline: %+v", s)
	}
	if again, err := domain.DecideKYC(s, domain.KYCFailed, "vendor", now); again != nil || err != nil {
		t.Fatalf("a repeated failure: %v %v", again, err)
	}

	for _, purpose := range []domain.SessionPurpose{domain.SessionPurposeEnroll, domain.SessionPurposeUpdate} {
		s := open(purpose)
		var last *domain.Event
		for range domain.MaxCodeAttempts {
			last = step(t, s, func(s *domain.Session) (*domain.Event, error) { return domain.CheckCode(s, false, now) })
		}
		if !s.Locked || s.Step(now) != domain.StepLocked || s.Status != domain.SessionOpen {
			t.Fatalf("%q after %d wrong codes: %+v", purpose, domain.MaxCodeAttempts, s)
		}
		wantPublic := purpose == domain.SessionPurposeEnroll
		if public(last) != wantPublic || (wantPublic && last.Payload.(*domain.DonorSessionLocked).DonorSessionID != s.ID) {
			t.Fatalf("%q lock event %+v", purpose, last)
		}
		exp := domain.Expire(s, now.Add(domain.SessionLifetime))
		if exp == nil || public(exp) != wantPublic {
			t.Fatalf("%q expiry %+v", purpose, exp)
		}
	}
}

// A re-consent session confirms the phone, then asks for consent to the
// new amount; the consent completes it.
func TestReconsentSession(t *testing.T) {
	now := time.Now()
	var s domain.Session
	expires := now.Add(domain.SessionLifetime).Truncate(time.Millisecond)
	created, err := domain.CreateSession(&s, domain.NewSession{
		ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1", DonorID: "dn_1",
		Giving: domain.Giving{Mode: domain.ModePercent, Value: 500}, Purpose: domain.SessionPurposeUpdate,
		EnrollmentID: "en_1", Previous: domain.Giving{Mode: domain.ModePercent, Value: 300}, ExpiresAt: expires,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(created)
	if s.Purpose != domain.SessionPurposeUpdate || s.EnrollmentID != "en_1" || s.Previous.Value != 300 || !s.ExpiresAt.Equal(expires) {
		t.Fatalf("created: %+v", s)
	}
	step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.SendCode(s, now) })
	step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.CheckCode(s, true, now) })
	if s.Step(now) != domain.StepConsent {
		t.Fatalf("after the phone: %s", s.Step(now))
	}
	ev := step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.Consent(s, graceTerms, "", now) })
	if text := ev.Payload.(*domain.ConsentGiven).Text; !strings.Contains(text, "5% of each paycheck") {
		t.Fatalf("consent text %q does not name the new amount", text)
	}
	if s.Status != domain.SessionCompleted || s.Step(now) != domain.StepDone {
		t.Fatalf("after consent: %+v", s)
	}
	if exp := domain.Expire(&s, expires); exp != nil {
		t.Fatalf("a completed session expired: %+v", exp)
	}
}

// Ledgers written before locks and declines were public hold them as
// internal events; stored under internal subjects, they decode to the
// retired payload and still lock or decline their session.
func TestOldInternalOutcomesStillFold(t *testing.T) {
	at := "2026-01-01T00:00:00.000Z"
	created := `{"event_id":"evt_1","event_type":"donor_session.created","occurred_at":"` + at + `","church_id":"ch_1","payload":{"donor_id":"dn_1","mode":"pct","value":3,"redirect_url":"https://x","token_hash":"h","expires_at":"2026-01-01T00:30:00.000Z"}}`
	locked := `{"event_id":"evt_2","event_type":"donor_session.locked","occurred_at":"` + at + `","church_id":"ch_1","payload":{}}`
	failed := `{"event_id":"evt_3","event_type":"donor_session.kyc_decided","occurred_at":"` + at + `","church_id":"ch_1","payload":{"outcome":"failed","source":"vendor"}}`
	decode := func(data string, public bool) domain.Event {
		t.Helper()
		ev, err := domain.DecodeStored("pt_a", "ds_1", public, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	old := decode(locked, false)
	if _, ok := old.Payload.(*domain.SessionLocked); !ok {
		t.Fatalf("an internal lock decodes as %T", old.Payload)
	}
	s := domain.Fold[domain.Session]([]domain.Event{decode(created, false), old})
	if !s.Locked {
		t.Fatal("an old internal lock no longer locks")
	}
	s = domain.Fold[domain.Session]([]domain.Event{decode(created, false), decode(failed, false)})
	if s.Status != domain.SessionDeclined {
		t.Fatal("an old failed decision no longer declines")
	}
	// The same name stored publicly is the public event.
	if ev := decode(`{"event_id":"evt_4","event_type":"donor_session.locked","occurred_at":"`+at+`","church_id":"ch_1","payload":{"donor_session_id":"ds_1"}}`, true); ev.Payload.(*domain.DonorSessionLocked).DonorSessionID != "ds_1" {
		t.Fatalf("public lock %+v", ev.Payload)
	}
	// A type stored with a visibility it never had is refused.
	if _, err := domain.DecodeStored("pt_a", "ds_1", true, []byte(created)); err == nil {
		t.Fatal("an internal type stored as public decoded")
	}
	// And nothing new can be recorded under the retired registration.
	if _, err := domain.NewEvent("pt_a", "ds_1", "ch_1", time.Now(), &domain.SessionLocked{}).Envelope(); err == nil {
		t.Fatal("a retired payload was enveloped")
	}
}
