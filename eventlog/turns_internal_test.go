package eventlog

import (
	"context"
	"strconv"
	"testing"
)

// The notes of aggregates nobody holds stay within maxNotes however many
// aggregates were written, the newest is kept, and a holder that appended
// nothing leaves no note behind.
func TestTurnNotesStayBounded(t *testing.T) {
	ctx := context.Background()
	var ts turns
	hold := func(aggregate string, last uint64) uint64 {
		t.Helper()
		tu, release, err := ts.take(ctx, aggregate)
		if err != nil {
			t.Fatal(err)
		}
		found := tu.note.last
		tu.note.last = last
		release()
		return found
	}
	for i := 1; i <= maxNotes+100; i++ {
		hold(strconv.Itoa(i), uint64(i))
	}
	if len(ts.notes) != maxNotes || len(ts.m) != 0 {
		t.Fatalf("%d notes and %d turns after %d aggregates; want %d and 0", len(ts.notes), len(ts.m), maxNotes+100, maxNotes)
	}
	newest := strconv.Itoa(maxNotes + 100)
	if found := hold(newest, 0); found != maxNotes+100 {
		t.Fatalf("the newest aggregate's turn starts from %d; want %d", found, maxNotes+100)
	}
	if found := hold(newest, 0); found != 0 {
		t.Fatalf("a turn after one that appended nothing starts from %d; want 0", found)
	}
}
