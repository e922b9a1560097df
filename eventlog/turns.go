package eventlog

import (
	"context"
	"sync"
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
	// notes keeps the last sequence an aggregate's last holder appended
	// once nobody holds or waits for its turn, for the next command of it
	// to start from (see Command.LastOnly): a partner's imports or
	// deposits that come one after another, not queued, then cost no
	// ledger read either. It holds at most maxNotes aggregates, the
	// ones to forget picked at random, so it follows the aggregates being
	// written, not the history.
	notes map[string]uint64
}

// maxNotes bounds turns.notes: 64 Ki aggregates, about 8 MiB at most.
const maxNotes = 1 << 16

type turn struct {
	held chan struct{}
	refs int
	// last is the aggregate's newest sequence as the last holder left it,
	// from its own append, or 0 when it did not know it (see
	// Command.LastOnly). Only the holder reads or writes it; when the turn
	// is dropped it goes to turns.notes, and a new turn of the aggregate
	// starts from there.
	last uint64
}

// take waits for the aggregate's turn and returns its release.
func (t *turns) take(ctx context.Context, aggregate string) (func(), error) {
	_, release, err := t.takeTurn(ctx, aggregate)
	return release, err
}

// takeTurn is take, with the turn for its holder's note of the last
// sequence.
func (t *turns) takeTurn(ctx context.Context, aggregate string) (*turn, func(), error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*turn{}
	}
	tu, ok := t.m[aggregate]
	if !ok {
		tu = &turn{held: make(chan struct{}, 1), last: t.notes[aggregate]}
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
	if tu.last == 0 {
		return
	}
	if t.notes == nil {
		t.notes = map[string]uint64{}
	}
	if len(t.notes) >= maxNotes {
		for k := range t.notes { // a random one: map iteration starts anywhere
			delete(t.notes, k)
			break
		}
	}
	t.notes[aggregate] = tu.last
}

// Turn waits for key's turn among this process's callers and returns its
// release. It is for a rule that spans aggregates, which the ledger's
// per-aggregate check cannot enforce (how many endpoints a partner has):
// name the key for what the rule covers, such as a Subjects filter, and take
// it before running the commands it guards.
func (l *Ledger) Turn(ctx context.Context, key string) (func(), error) {
	return l.turns.take(ctx, "turn:"+key)
}
