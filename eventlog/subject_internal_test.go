package eventlog

import (
	"testing"

	"github.com/partnergiving/giving/domain"
)

// A subject the ledger stores an event under reads back as the event's
// partner, aggregate, type and visibility; anything else is refused.
func TestSubjectsParseWhatEventWrites(t *testing.T) {
	s := Subjects{env: string(domain.Sandbox)}
	for _, ev := range []domain.Event{
		{Type: "deposit.received", PartnerID: "prt_1", AggregateID: "book_prt_1"},
		{Type: "church.imported", PartnerID: "prt_2", AggregateID: "chu_9"},
	} {
		subject, err := s.Event(ev)
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := domain.EventTypeSpec(ev.Type)
		got, err := s.parse(subject)
		want := parsed{Partner: ev.PartnerID, Aggregate: ev.AggregateID, Type: ev.Type, Public: spec.Public}
		if err != nil || got != want {
			t.Errorf("parse(%q) = %+v, %v; want %+v", subject, got, err, want)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = s.parse(subject) }); n != 0 {
			t.Errorf("parse(%q) allocates %.0f times; every record read is parsed", subject, n)
		}
	}
	for _, subject := range []string{
		"",
		"ledger",
		"ledger.sandbox",
		"ledger.live.prt_1.book.pub.deposit.received",     // another environment
		"ledger.sandboxx.prt_1.book.pub.deposit.received", // an environment that only starts like it
		"other.sandbox.prt_1.book.pub.deposit.received",
		"ledger.sandbox.prt_1.book.pub.deposit",            // a type without its verb
		"ledger.sandbox.prt_1.book.pub.deposit.received.x", // a token too many
		"ledger.sandbox.prt_1.book.all.deposit.received",   // neither pub nor int
		"ledger.sandbox.prt_1.pub.deposit.received",        // no aggregate
		"ledger.sandbox..book.pub.deposit.received",        // an empty token
	} {
		if p, err := s.parse(subject); err == nil {
			t.Errorf("parse(%q) = %+v, want an error", subject, p)
		}
	}
}
