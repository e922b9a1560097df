package eventlog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A ledger written before session locks and declines were public events
// holds them as internal events on internal subjects: donor_session.locked
// with no payload, and donor_session.kyc_decided with outcome failed. They
// still load into their session, never reach a public read, and live on
// next to the public events of the same name that new locks record.
func TestOldInternalSessionOutcomesReplay(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt, church := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixChurch)
	subjects := l.Subjects()
	at := domain.FormatTime(time.Now())
	legacy := func(session, typ, payload string) {
		t.Helper()
		data := `{"event_id":"` + domain.NewID(domain.PrefixEvent) + `","event_type":"` + typ + `","occurred_at":"` + at + `","church_id":"` + church + `","payload":` + payload + `}`
		// The subject the old code stored it under: internal.
		subject := strings.TrimSuffix(subjects.Aggregate(pt, session), ">") + "int." + typ
		if _, err := l.JetStream().Publish(ctx, subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	create := func() string {
		id := domain.NewID(domain.PrefixSession)
		_, err := l.Execute(ctx, eventlog.Command{Partner: pt, Aggregate: id, Decide: func(context.Context, eventlog.History) (*domain.Event, error) {
			ev, err := domain.CreateSession(&domain.Session{}, domain.NewSession{ID: id, PartnerID: pt, ChurchID: church, DonorID: "dn_x"}, time.Now())
			return &ev, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	locked, declined, fresh := create(), create(), create()
	legacy(locked, "donor_session.locked", `{}`)
	legacy(declined, "donor_session.kyc_decided", `{"outcome":"failed","source":"vendor"}`)

	load := func(id string) domain.Session {
		t.Helper()
		var s domain.Session
		_, err := l.Execute(ctx, eventlog.Command{Partner: pt, Aggregate: id, Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			s = domain.Fold[domain.Session](h.Events)
			return nil, nil
		}})
		if err != nil {
			t.Fatalf("load %s: %v", id, err)
		}
		return s
	}
	if s := load(locked); !s.Locked {
		t.Fatal("an old internal lock does not lock its session")
	}
	if s := load(declined); s.Status != domain.SessionDeclined {
		t.Fatal("an old failed decision does not decline its session")
	}

	// A new lock is recorded publicly, under the same type name.
	_, err := l.Execute(ctx, eventlog.Command{Partner: pt, Aggregate: fresh, Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
		s := domain.Fold[domain.Session](h.Events)
		s.CodeSentAt, s.CodeAttempts = new(time.Now()), domain.MaxCodeAttempts-1
		return domain.CheckCode(&s, false, time.Now())
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s := load(fresh); !s.Locked {
		t.Fatal("a new lock does not lock")
	}
	recs, _, err := l.Read(ctx, subjects.Public(pt, ""), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Aggregate != fresh || recs[0].Type != "donor_session.locked" {
		t.Fatalf("public events %+v, want the new lock only", recs)
	}
}
