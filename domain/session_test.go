package domain_test

import (
	"errors"
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
