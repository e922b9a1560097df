package projections_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
)

// A partner's public events are kept by id in blocks of ids: each must be
// found at its sequence whether the blocks were written in one transaction
// or grew over transactions of every size, with ids that come out of
// order (made by concurrent writers, or random within their second, as
// earlier builds made them): a block in the middle takes ids and splits, and ids before
// every block start the first one again. Both files hold the same ids.
func TestEventsByIDReadTheBlocks(t *testing.T) {
	recs, mine := feedRecords(t, 3000, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	var seqs []uint64
	for seq := range mine {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	ids := make([]string, len(seqs))
	for i := range ids {
		ids[i] = domain.NewSortedID(domain.PrefixEvent, "pt_a")
	}
	if !slices.IsSorted(ids) {
		t.Fatal("sorted ids out of order")
	}
	// The ids in the order the events get them: windows of 60 shuffled
	// (every third one), and the five smallest given to the last events.
	r := rand.New(rand.NewPCG(1, 2))
	order := slices.Concat(ids[5:], ids[:5])
	for w := 0; w+60 <= len(order)-5; w += 180 {
		r.Shuffle(60, func(i, j int) { order[w+i], order[w+j] = order[w+j], order[w+i] })
	}
	for i, seq := range seqs {
		ev := mine[seq]
		ev.ID = order[i]
		data, err := ev.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		recs[seq-1].Data, mine[seq] = data, ev
	}

	whole, grown := wholeAndGrown(t, recs)
	for name, s := range map[string]*projections.Store{"whole": whole, "grown": grown} {
		for _, seq := range seqs {
			id := mine[seq].ID
			if got, ok, err := s.PublicEventSeq("pt_a", id); err != nil || !ok || got != seq {
				t.Fatalf("%s: %s at %d, %v (%v), want %d", name, id, got, ok, err, seq)
			}
			if _, ok, err := s.PublicEventSeq("pt_a", id+"0"); err != nil || ok {
				t.Fatalf("%s: found %s0, which is no event's (%v)", name, id, err)
			}
		}
		for _, id := range []string{"evt_", "evt_0", "evt_zzzz", ""} {
			if _, ok, err := s.PublicEventSeq("pt_a", id); err != nil || ok {
				t.Fatalf("%s: found %q, which is no event's (%v)", name, id, err)
			}
		}
		// Another partner's event is not this one's.
		var theirs struct {
			ID string `json:"event_id"`
		}
		if err := json.Unmarshal(recs[1].Data, &theirs); err != nil || recs[1].Partner != "pt_b" || theirs.ID == "" {
			t.Fatalf("record 2: %v, partner %s, id %q", err, recs[1].Partner, theirs.ID)
		}
		if _, ok, err := s.PublicEventSeq("pt_a", theirs.ID); err != nil || ok {
			t.Fatalf("%s: found pt_b's %s among pt_a's (%v)", name, theirs.ID, err)
		}
		if got, ok, err := s.PublicEventSeq("pt_b", theirs.ID); err != nil || !ok || got != 2 {
			t.Fatalf("%s: pt_b's %s at %d, %v (%v), want 2", name, theirs.ID, got, ok, err)
		}
	}
	if !reflect.DeepEqual(dump(t, whole)["public_events"], dump(t, grown)["public_events"]) {
		t.Fatal("the public events by id differ between the files")
	}
	if n := len(dump(t, whole)["public_events"]); n != len(recs) {
		t.Fatalf("%d public events by id, want %d", n, len(recs))
	}
}
