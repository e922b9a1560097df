package projections_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// feedRecords builds ledger records 1..n: public events of partner pt_a,
// one a minute from base, with pt_b's events in between so the partner's
// sequences are sparse. Every third pt_a event is of another type.
func feedRecords(t *testing.T, n int, base time.Time) ([]eventlog.Record, map[uint64]domain.Event) {
	t.Helper()
	var recs []eventlog.Record
	mine := map[uint64]domain.Event{}
	for i := range n {
		partner := "pt_a"
		if i%2 == 1 {
			partner = "pt_b"
		}
		var p domain.Payload = &domain.WebhookEndpointAutoDisabled{WebhookEndpointID: "we_x", Reason: domain.DisabledFailing}
		if i%6 == 4 {
			p = &domain.EnrollmentActivated{EnrollmentID: domain.NewID(domain.PrefixEnrollment)}
		}
		ev := domain.NewEvent(partner, domain.NewID(domain.PrefixEndpoint), "", base.Add(time.Duration(i)*time.Minute), p)
		data, err := ev.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(i + 1)
		recs = append(recs, eventlog.Record{Seq: seq, Partner: partner, Aggregate: ev.AggregateID, Type: ev.Type, Public: true, Data: data})
		if partner == "pt_a" {
			mine[seq] = ev
		}
	}
	return recs, mine
}

func TestFeedPositionAtAndRecoveryPages(t *testing.T) {
	base := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	recs, mine := feedRecords(t, 40, base)
	store := openStore(t, filepath.Join(t.TempDir(), "p.db"))
	defer store.Close()
	if err := store.Apply(recs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Time
		want uint64
	}{
		{base.Add(-time.Hour), 0},
		{base, 0},
		{base.Add(90 * time.Second), 1},                   // pt_a's events are seqs 1, 3, 5...: the next is seq 3 at 2m
		{base.Add(2 * time.Minute), 1},                    // exactly an event's time: read from it
		{base.Add(30*time.Minute + time.Millisecond), 31}, // the next is seq 33 at 32m
		{base.Add(39 * time.Minute), 39},                  // after pt_a's last (seq 39 at 38m)
		{base.Add(1000 * time.Minute), 39},
	} {
		got, err := store.FeedPositionAt("pt_a", c.at)
		if err != nil || got != c.want {
			t.Errorf("FeedPositionAt(%v) = %d, %v; want %d", c.at.Sub(base), got, err, c.want)
		}
	}

	// A recovery of one type, from 10m to 30m, up to seq 29: pt_a's
	// webhook_endpoint.disabled events 13, 15, 19, 21, 25, 27 (11, 17, 23
	// and 29 are of another type), in pages of 2.
	r := domain.WebhookRecovery{PartnerID: "pt_a", Types: []string{"webhook_endpoint.disabled"}, UpTo: 29, From: base.Add(10 * time.Minute), Until: base.Add(30 * time.Minute)}
	var want []uint64
	for seq := uint64(1); seq <= 29; seq++ {
		if ev, ok := mine[seq]; ok && r.Includes(ev.Type, ev.OccurredAt) {
			want = append(want, seq)
		}
	}
	var got []uint64
	after := uint64(0)
	for range 20 {
		page, reached, done, err := store.RecoveryPage(&r, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.ID != mine[e.Seq].ID || e.Type != "webhook_endpoint.disabled" {
				t.Fatalf("page entry %+v is not pt_a's event at %d", e, e.Seq)
			}
			got = append(got, e.Seq)
		}
		after = reached
		if done {
			break
		}
	}
	if len(want) != 6 || len(got) != len(want) {
		t.Fatalf("recovered %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("recovered %v, want %v", got, want)
		}
	}
}

// wholeAndGrown returns two stores holding recs: one applied in one
// transaction, one grown over transactions of 1 to 300 records. Both are
// closed when the test ends.
func wholeAndGrown(t *testing.T, recs []eventlog.Record) (whole, grown *projections.Store) {
	t.Helper()
	dir := t.TempDir()
	whole = openStore(t, filepath.Join(dir, "whole.db"))
	t.Cleanup(func() { whole.Close() })
	if err := whole.Apply(recs); err != nil {
		t.Fatal(err)
	}
	grown = openStore(t, filepath.Join(dir, "grown.db"))
	t.Cleanup(func() { grown.Close() })
	for from, size := 0, 1; from < len(recs); from, size = from+size, size%300+7 {
		if err := grown.Apply(recs[from:min(from+size, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	return whole, grown
}

// A partner's events of each type are kept in blocks of sequences (the
// feed's types): filtered pages must read the same whether the blocks were
// written in one transaction, or grew over transactions of every size (a
// block extended, filled, and new ones started), from any position.
func TestFilteredPagesReadTheTypesBlocks(t *testing.T) {
	recs, mine := feedRecords(t, 2400, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	disabled, activated := "webhook_endpoint.auto_disabled", "enrollment.activated"
	want := func(types []string, after uint64, limit int) ([]uint64, bool) {
		var seqs []uint64
		for seq := after + 1; seq <= uint64(len(recs)); seq++ {
			if ev, ok := mine[seq]; ok && slices.Contains(types, ev.Type) {
				seqs = append(seqs, seq)
			}
		}
		if len(seqs) > limit {
			return seqs[:limit], true
		}
		return seqs, false
	}
	if n, _ := want([]string{activated}, 0, 1<<20); len(n) < 3*128 {
		t.Fatalf("%d events of the rarer type: want blocks enough to cross", len(n))
	}
	whole, grown := wholeAndGrown(t, recs)
	for _, s := range []*projections.Store{whole, grown} {
		for _, types := range [][]string{{disabled}, {activated}, {activated, disabled}} {
			for _, limit := range []int{1, 7, 100} {
				for after := uint64(0); after <= uint64(len(recs))+1; after += 13 {
					got, more, err := s.Feed("pt_a", types, after, limit)
					if err != nil {
						t.Fatal(err)
					}
					seqs := make([]uint64, len(got))
					for i, e := range got {
						seqs[i] = e.Seq
					}
					wantSeqs, wantMore := want(types, after, limit)
					if !slices.Equal(seqs, wantSeqs) || more != wantMore {
						t.Fatalf("%v after %d, limit %d: %v (more %v), want %v (more %v)", types, after, limit, seqs, more, wantSeqs, wantMore)
					}
				}
			}
		}
	}
}
