package main

import (
	"context"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// lastSeq is the ledger's newest sequence.
func (ts *testStack) lastSeq(t *testing.T) uint64 {
	t.Helper()
	seq, err := ts.ledger.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// imports returns every church.imported event of the partner, oldest first.
func imports(t *testing.T, l *eventlog.Ledger, partner string) []*domain.ChurchesImported {
	t.Helper()
	var out []*domain.ChurchesImported
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().Aggregate(partner, domain.ChurchCatalogue), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := ev.Payload.(*domain.ChurchesImported); ok {
				out = append(out, p)
			}
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}
