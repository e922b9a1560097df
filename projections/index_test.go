package projections

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The index writes are made in key order (in a partner index, partner by
// partner in the order of their ids, then by key within the partner's
// bucket), and of two writes to one key the later last: what a stable sort
// of the whole gives, whichever way the partners and their keys came.
func TestIndexWritesInKeyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	partners := make([]string, 40)
	for i := range partners {
		partners[i] = domain.NewID(domain.PrefixPartner)
	}
	w := newIndexWrites(0)
	for seq := uint64(1); seq <= 3000; seq++ {
		p := partners[rng.IntN(len(partners))]
		// Ids a few to a partner, so that the public events index gets
		// writes to one key twice.
		id := fmt.Sprintf("evt_%03d", rng.IntN(50))
		rec := eventlog.Record{Seq: seq, Partner: p, Public: rng.IntN(4) > 0, Type: []string{"a.b", "c.d"}[rng.IntN(2)],
			MsgID: fmt.Sprintf("idem:m%d:0", rng.IntN(500)), Data: fmt.Appendf(nil, "%d", seq)}
		w.indexRecord(rec, domain.Event{ID: id})
	}
	rank := w.ranks()
	for i, kvs := range w.puts {
		want := slices.Clone(kvs)
		slices.SortStableFunc(want, func(a, b keyValue) int {
			if c := strings.Compare(w.partner[a.group], w.partner[b.group]); c != 0 && partnerIndex(index(i)) {
				return c
			}
			return bytes.Compare(a.k, b.k)
		})
		got := sortByGroup(kvs, rank)
		if len(got) != len(want) || len(got) < 500 {
			t.Fatalf("index %d: %d writes sorted, want %d (at least 500)", i, len(got), len(want))
		}
		for j := range got {
			if !bytes.Equal(got[j].k, want[j].k) || !bytes.Equal(got[j].v, want[j].v) || (partnerIndex(index(i)) && got[j].group != want[j].group) {
				t.Fatalf("index %d: write %d is %q=%q, want %q=%q", i, j, got[j].k, got[j].v, want[j].k, want[j].v)
			}
		}
	}
}
