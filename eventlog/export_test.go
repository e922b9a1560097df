package eventlog

import (
	"context"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DirectLastForTest runs the ledger's direct get of the last message on
// subject in stream.
func (l *Ledger) DirectLastForTest(ctx context.Context, stream, subject string) (int, error) {
	msgs, _, err := directMsgs(ctx, l.nc, stream, directGetRequest{LastFor: subject})
	return len(msgs), err
}

// SetTurnClockForTest sets the clock of the turns' notes, until the
// returned function restores it.
func SetTurnClockForTest(now func() time.Time) (restore func()) {
	old := turnClock
	turnClock = now
	return func() { turnClock = old }
}

// SharedForTest is how long an aggregate another writer appended to is
// read from the ledger before each command.
const SharedForTest = sharedFor

// SetGatherWaitForTest sets how long Follow waits for the rest of a backlog,
// until the returned function restores it.
func SetGatherWaitForTest(d time.Duration) (restore func()) {
	old := gatherWait
	gatherWait = d
	return func() { gatherWait = old }
}

// SetSharedReaderCheckForTest sets how often a consuming shared reader
// looks for its consumer, until the returned function restores it.
func SetSharedReaderCheckForTest(d time.Duration) (restore func()) {
	old := sharedReaderCheck
	sharedReaderCheck = d
	return func() { sharedReaderCheck = old }
}

// DeleteForTest deletes the shared reader's consumer from the server.
func (r *SharedReader) DeleteForTest(ctx context.Context) error {
	return r.l.stream.DeleteConsumer(ctx, r.cons.CachedInfo().Name)
}

// WatchForTest runs the reader's check of its consumer for at most d and
// returns why it stopped the consuming (nil if it did not).
func (r *SharedReader) WatchForTest(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cctx, stop := context.WithCancelCause(wctx)
	defer stop(nil)
	r.watch(cctx, stop)
	if cause := context.Cause(cctx); cause != context.DeadlineExceeded {
		return cause
	}
	return nil
}

// OutForTest returns how many events the shared reader's consumer has not
// sent yet, how many requests for more it has waiting, and how many events
// it has sent and not had settled.
func (r *SharedReader) OutForTest(ctx context.Context) (pending uint64, asked, unsettled int, err error) {
	info, err := r.cons.Info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	return info.NumPending, info.NumWaiting, info.NumAckPending, nil
}

// TurnWaitersForTest reports how many commands of this process hold or wait
// for the aggregate's turn.
func (l *Ledger) TurnWaitersForTest(partner, aggregate string) int {
	l.turns.mu.Lock()
	defer l.turns.mu.Unlock()
	if tu, ok := l.turns.m[l.subjects.Aggregate(partner, aggregate)]; ok {
		return tu.refs
	}
	return 0
}

// SetStallAfterForTest sets how long a watchdog lets a consumer go without
// a message while some wait for it, until the returned function restores
// it.
func SetStallAfterForTest(d time.Duration) (restore func()) {
	old := stallAfter
	stallAfter = d
	return func() { stallAfter = old }
}

// StallsForTest is how many stalls of consumer m counted.
var StallsForTest = stalls

// RequestsByConnectionForTest is how many messages the embedded server has
// taken in from each of the ledger's connections, by connection name.
func (l *Ledger) RequestsByConnectionForTest() (map[string]int64, error) {
	cz, err := l.srv.Connz(&server.ConnzOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, c := range cz.Conns {
		out[c.Name] = c.InMsgs
	}
	return out, nil
}
