package eventlog

import (
	"context"
	"sync"
	"time"
)

// turns makes the commands of one aggregate take turns within this process.
// The ledger's expected-sequence check keeps the aggregate consistent on its
// own, but commands racing inside one process would mostly spend their
// attempts losing to each other: sixteen imports for one partner at once
// could exhaust their retries. Waiting for a turn costs nothing a conflict
// would not have cost, and leaves the conflict check for what it is needed
// for: other instances and the operator CLI.
type turns struct {
	mu sync.Mutex
	m  map[string]*turn
	// notes keeps a turn's note once nobody holds or waits for it, for
	// the next command of the aggregate to start from (see
	// Command.LastOnly): a partner's imports or deposits that come one
	// after another, not queued, then cost no ledger read either. It
	// holds at most maxNotes aggregates, the ones to forget picked at
	// random, so it follows the aggregates being written, not the
	// history.
	notes map[string]note
}

// maxNotes bounds turns.notes: 64 Ki aggregates, about 10 MiB at most.
const maxNotes = 1 << 16

// note is what a turn knows of its aggregate beyond its holder.
type note struct {
	// last is the aggregate's newest sequence as the last holder left it,
	// from its own append, or 0 when it did not know it.
	last uint64
	// shared is until when the holders do not start from last: another
	// writer (an instance behind the same load balancer) appended to the
	// aggregate between two of this process's commands lately, so a note
	// would mostly cost an append refused before the ledger read anyway.
	shared time.Time
}

// sharedFor is how long an aggregate found written by another writer is
// read from the ledger before each command instead of started from the
// note.
const sharedFor = time.Minute

// turnClock tells the notes' time (a test sets it).
var turnClock = time.Now

// usable reports whether the holder may start from n.last.
func (n note) usable(now time.Time) bool {
	return n.last != 0 && !now.Before(n.shared)
}

type turn struct {
	held chan struct{}
	refs int
	// note is for LastOnly commands (see Command.LastOnly). Only the
	// holder reads or writes it; when the turn is dropped it goes to
	// turns.notes, and a new turn of the aggregate starts from there.
	note note
}

// take waits for the aggregate's turn and returns it, for its holder's
// note of the last sequence, and its release.
func (t *turns) take(ctx context.Context, aggregate string) (*turn, func(), error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*turn{}
	}
	tu, ok := t.m[aggregate]
	if !ok {
		tu = &turn{held: make(chan struct{}, 1), note: t.notes[aggregate]}
		delete(t.notes, aggregate)
		t.m[aggregate] = tu
	}
	tu.refs++
	t.mu.Unlock()
	select {
	case tu.held <- struct{}{}:
		return tu, func() { <-tu.held; t.drop(aggregate, tu) }, nil
	case <-ctx.Done():
		t.drop(aggregate, tu)
		return nil, nil, ctx.Err()
	}
}

func (t *turns) drop(aggregate string, tu *turn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tu.refs--; tu.refs > 0 {
		return
	}
	delete(t.m, aggregate)
	if tu.note.last == 0 && !turnClock().Before(tu.note.shared) {
		return // nothing worth keeping
	}
	if t.notes == nil {
		t.notes = map[string]note{}
	}
	if len(t.notes) >= maxNotes {
		for k := range t.notes { // a random one: map iteration starts anywhere
			delete(t.notes, k)
			break
		}
	}
	t.notes[aggregate] = tu.note
}

// Turn waits for key's turn among this process's callers and returns its
// release. It is for a rule that spans aggregates, which the ledger's
// per-aggregate check cannot enforce (how many endpoints a partner has):
// name the key for what the rule covers, such as a Subjects filter, and take
// it before running the commands it guards.
func (l *Ledger) Turn(ctx context.Context, key string) (func(), error) {
	_, release, err := l.turns.take(ctx, "turn:"+key)
	return release, err
}
