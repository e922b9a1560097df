package eventlog

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// The server checks every member of an atomic batch against the stream as
// it was before the batch: two members guarded by one aggregate, on two
// subjects, both expecting an empty aggregate, are both stored. This is why
// a batch never holds two appends to one aggregate (take). If the server
// starts refusing such a batch, this test says so and the rule may go.
func TestABatchChecksEachMemberAgainstTheStreamBeforeIt(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	guard := l.subjects.Aggregate("pt_a", "en_a")
	member := func(typ string) *queuedAppend {
		m := nats.NewMsg(l.subjects.prefix() + "pt_a.en_a.pub." + typ)
		m.Data = []byte(`{}`)
		m.Header.Set(jetstream.MsgIDHeader, typ)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, guard)
		return &queuedAppend{msg: m}
	}
	acks, err := l.commit.atomic(ctx, []*queuedAppend{member("enrollment.paused"), member("enrollment.canceled")})
	if err != nil || len(acks) != 2 {
		t.Fatalf("the server refused the batch (%v): each member may now be checked against the ones before it", err)
	}
	// A refused batch stores nothing and says so with an API error.
	_, err = l.commit.atomic(ctx, []*queuedAppend{member("enrollment.resumed"), member("enrollment.ended")})
	var refused *jetstream.APIError
	if !errors.As(err, &refused) {
		t.Fatalf("a batch expecting an aggregate that has events: %v, want the server's refusal", err)
	}
	if last, err := l.LastSeq(ctx); err != nil || last != 2 {
		t.Fatalf("the ledger holds %d events (%v), want the first batch's 2", last, err)
	}
}

// take forms a batch in arrival order, leaving behind for the next batch
// an append whose aggregate or dedup id the batch already holds, and
// dropping one whose caller gave up.
func TestTakeKeepsOneAppendPerAggregateAndDedupID(t *testing.T) {
	q := func(guard, dedup string) *queuedAppend {
		return &queuedAppend{ctx: context.Background(), guard: guard, dedup: dedup}
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	a1, b1, a2, c1, c1again, d1 := q("a", "1"), q("b", "2"), q("a", "3"), q("c", "4"), q("e", "4"), q("d", "5")
	late := &queuedAppend{ctx: gaveUp, guard: "f", dedup: "6"}
	g := &groupCommit{queue: []*queuedAppend{a1, late, b1, a2, c1, c1again, d1}}
	if got := g.take(); !slices.Equal(got, []*queuedAppend{a1, b1, c1, d1}) {
		t.Fatalf("first batch %v", got)
	}
	if got := g.take(); !slices.Equal(got, []*queuedAppend{a2, c1again}) {
		t.Fatalf("second batch %v", got)
	}
	if got := g.take(); len(got) != 0 || len(g.queue) != 0 {
		t.Fatalf("third batch %v, queue %v", got, g.queue)
	}
}
