package eventlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A long aggregate's commands in this process start from the sequence the
// one before them appended, queued behind it or not, without asking the
// ledger; what another writer appended in between fails that expectation,
// and the command decides again, at once, from the ledger's answer. A
// refusal decided from the note is decided again from the ledger's answer
// too, since no append checks it.
func TestLastOnlyCommandsStartFromTheLastAppend(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	pt := createPartner(t, l, "Acme")
	refused := errors.New("refused")
	clock := time.Now()
	defer eventlog.SetTurnClockForTest(func() time.Time { return clock })()

	// run runs a LastOnly command whose decisions answer, in turn, for each
	// history it is shown (the last for any more), and reports the
	// histories' last sequences and the outcome on done.
	type outcome struct {
		seen []uint64
		out  eventlog.Outcome
		err  error
	}
	run := func(done chan<- outcome, decide ...func(h eventlog.History) (*domain.Event, error)) {
		var o outcome
		o.out, o.err = l.Execute(ctx, eventlog.Command{
			Partner: pt, Aggregate: pt, LastOnly: true,
			Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
				o.seen = append(o.seen, h.Last)
				return decide[min(len(o.seen), len(decide))-1](h)
			},
		})
		done <- o
	}
	issue := func(eventlog.History) (*domain.Event, error) { ev := keyIssued(pt); return &ev, nil }
	refuse := func(eventlog.History) (*domain.Event, error) { return nil, refused }
	// waitQueued waits until n commands hold or wait for the partner's turn.
	waitQueued := func(n int) {
		t.Helper()
		eventlogtest.WaitFor(t, 10*time.Second, "the commands to queue", func() bool { return l.TurnWaitersForTest(pt, pt) >= n })
	}

	// The first command decides from the ledger (partner.created at 1);
	// the second, queued behind it, from the first's append, with no other
	// writer: one decision each.
	firstDone, secondDone := make(chan outcome, 1), make(chan outcome, 1)
	go run(firstDone, func(h eventlog.History) (*domain.Event, error) {
		go run(secondDone, issue)
		waitQueued(2)
		return issue(h)
	})
	first, second := <-firstDone, <-secondDone
	if first.err != nil || second.err != nil {
		t.Fatalf("commands: %v, %v", first.err, second.err)
	}
	if len(first.seen) != 1 || first.seen[0] != 1 || len(second.seen) != 1 || second.seen[0] != first.out.Record.Seq {
		t.Fatalf("histories seen: %v then %v; want [1] then [%d], the first's append", first.seen, second.seen, first.out.Record.Seq)
	}

	// Another writer appends between a command and the one queued behind
	// it: the second's append, expecting the first's sequence, conflicts,
	// and it decides again from the ledger, which holds the other append.
	var other uint64
	firstDone, secondDone = make(chan outcome, 1), make(chan outcome, 1)
	go run(firstDone, func(h eventlog.History) (*domain.Event, error) {
		go run(secondDone, func(h eventlog.History) (*domain.Event, error) {
			if other == 0 {
				app, err := l.Append(ctx, keyIssued(pt), "", h.Last)
				if err != nil {
					return nil, err
				}
				other = app.Record.Seq
			}
			return issue(h)
		})
		waitQueued(2)
		return issue(h)
	})
	first, second = <-firstDone, <-secondDone
	if first.err != nil || second.err != nil {
		t.Fatalf("commands: %v, %v", first.err, second.err)
	}
	if len(second.seen) != 2 || second.seen[0] != first.out.Record.Seq || second.seen[1] != other || second.out.Record.Seq != other+1 {
		t.Fatalf("second command saw %v and appended at %d; want [%d %d] and %d", second.seen, second.out.Record.Seq, first.out.Record.Seq, other, other+1)
	}
	clock = clock.Add(eventlog.SharedForTest) // the other writer is forgotten (see below)

	// A refusal decided from the note is decided again from the ledger:
	// the second command refuses twice, seeing the first's append both
	// times (nobody else wrote), and its refusal is what it returns.
	firstDone, secondDone = make(chan outcome, 1), make(chan outcome, 1)
	go run(firstDone, func(h eventlog.History) (*domain.Event, error) {
		go run(secondDone, refuse)
		waitQueued(2)
		return issue(h)
	})
	first, second = <-firstDone, <-secondDone
	if first.err != nil || !errors.Is(second.err, refused) || second.out.Record != nil {
		t.Fatalf("commands: %v, %+v %v; want the second's refusal", first.err, second.out, second.err)
	}
	if len(second.seen) != 2 || second.seen[0] != first.out.Record.Seq || second.seen[1] != first.out.Record.Seq {
		t.Fatalf("refusing command saw %v; want the first's append, from the note, then from the ledger", second.seen)
	}

	// The refusal left no note: a command alone asks the ledger.
	done := make(chan outcome, 1)
	run(done, issue)
	alone := <-done
	if alone.err != nil || len(alone.seen) != 1 || alone.seen[0] != first.out.Record.Seq {
		t.Fatalf("a command alone saw %v (%v); want the ledger's last, %d", alone.seen, alone.err, first.out.Record.Seq)
	}

	// Its append outlives its turn: the next command alone starts from it,
	// nobody queued behind it.
	run(done, issue)
	next := <-done
	if next.err != nil || len(next.seen) != 1 || next.seen[0] != alone.out.Record.Seq {
		t.Fatalf("the next command alone saw %v (%v); want the last one's append, %d", next.seen, next.err, alone.out.Record.Seq)
	}

	// Another writer between two commands alone: the second starts from
	// the note, conflicts, and decides again from the ledger.
	app, err := l.Append(ctx, keyIssued(pt), "", next.out.Record.Seq)
	if err != nil {
		t.Fatal(err)
	}
	run(done, issue)
	after := <-done
	if after.err != nil || len(after.seen) != 2 || after.seen[0] != next.out.Record.Seq || after.seen[1] != app.Record.Seq || after.out.Record.Seq != app.Record.Seq+1 {
		t.Fatalf("a command after another writer saw %v and appended at %+v (%v); want [%d %d] and %d", after.seen, after.out.Record, after.err, next.out.Record.Seq, app.Record.Seq, app.Record.Seq+1)
	}

	// The aggregate has another writer: for a while its commands ask the
	// ledger first, so each costs one decision even when the other
	// writer comes between again.
	for range 2 {
		app, err := l.Append(ctx, keyIssued(pt), "", after.out.Record.Seq)
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(eventlog.SharedForTest / 3)
		run(done, issue)
		if after = <-done; after.err != nil || len(after.seen) != 1 || after.seen[0] != app.Record.Seq {
			t.Fatalf("a command of an aggregate with another writer saw %v (%v); want the ledger's last, [%d]", after.seen, after.err, app.Record.Seq)
		}
	}
	// Once the while is over, the next command starts from the last one's
	// append again, and the other writer still fails it.
	clock = clock.Add(eventlog.SharedForTest / 3)
	app, err = l.Append(ctx, keyIssued(pt), "", after.out.Record.Seq)
	if err != nil {
		t.Fatal(err)
	}
	run(done, issue)
	if later := <-done; later.err != nil || len(later.seen) != 2 || later.seen[0] != after.out.Record.Seq || later.seen[1] != app.Record.Seq {
		t.Fatalf("a command after the while saw %v (%v); want [%d %d], the note and then the ledger", later.seen, later.err, after.out.Record.Seq, app.Record.Seq)
	}
}
