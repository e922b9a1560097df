package projections_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/projections"
)

// A donor's sessions are found through the donors index and the donor's
// part of the session index: every session of the donor, with its sealed
// phone (none for a session of a build that kept the phone in the vault),
// and none of another donor's, of the same partner or of another.
func TestSessionsOfDonorFindsEachOfTheDonorsSessions(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	store := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	defer store.Close()
	p, stop := runProjector(t, l, store)
	defer stop()

	pt1, pt2 := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner)
	donor, other, elsewhere := domain.NewID(domain.PrefixDonor), domain.NewID(domain.PrefixDonor), domain.NewID(domain.PrefixDonor)
	phone := func(n byte) *domain.SealedPhone {
		return &domain.SealedPhone{Key: "pk_test", Sealed: []byte{n, n, n}}
	}
	var events []domain.Event
	session := func(partner, donorID string, sealed *domain.SealedPhone) projections.SessionRef {
		id := domain.NewID(domain.PrefixSession)
		ev, err := domain.CreateSession(&domain.Session{}, domain.NewSession{
			ID: id, PartnerID: partner, ChurchID: domain.NewID(domain.PrefixChurch), DonorID: donorID,
			Giving: domain.Giving{Mode: domain.ModePercent, Value: 2_00}, RedirectURL: "https://p.example/back",
			TokenHash: "hash-" + id, Phone: sealed,
		}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
		return projections.SessionRef{PartnerID: partner, SessionID: id}
	}
	first := session(pt1, donor, phone(1))
	session(pt1, other, phone(2))
	older := session(pt1, donor, nil)
	session(pt2, elsewhere, phone(3))
	if _, err := probe.Fill(ctx, l, events); err != nil {
		t.Fatal(err)
	}
	catchUp(t, p)

	got, err := store.SessionsOfDonor(donor)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]projections.DonorSession{
		first.SessionID: {PartnerID: pt1, SessionID: first.SessionID, Phone: phone(1)},
		older.SessionID: {PartnerID: pt1, SessionID: older.SessionID},
	}
	if len(got) != len(want) {
		t.Fatalf("the donor's sessions: %+v, want %+v", got, want)
	}
	for _, s := range got {
		if !reflect.DeepEqual(s, want[s.SessionID]) {
			t.Errorf("session %s: %+v, want %+v", s.SessionID, s, want[s.SessionID])
		}
	}
	for _, d := range []string{other, elsewhere} {
		if got, err := store.SessionsOfDonor(d); err != nil || len(got) != 1 {
			t.Errorf("donor %s: %+v, %v; want its one session", d, got, err)
		}
	}
	if got, err := store.SessionsOfDonor(domain.NewID(domain.PrefixDonor)); err != nil || len(got) != 0 {
		t.Errorf("a donor without sessions: %+v, %v", got, err)
	}
}
