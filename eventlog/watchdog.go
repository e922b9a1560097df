package eventlog

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// A long-lived consumer recovers on its own from most losses: nats.go asks
// again after a missed heartbeat, and an ordered consumer makes itself
// again. Not from all: after the node leading the ledger was lost, an
// ordered consumer's re-creation was seen failing for ten minutes and more,
// retried without end and in silence (nats.go's reset has no attempt
// limit), while its follower, the projector, applied nothing and every
// write routed to the instance waited for it. A watchdog watches each
// consumer's progress instead: one that receives nothing for stallAfter,
// with no handler running, while the server holds messages for it, is torn
// down (its consuming ends with ErrStalled), so that its owner makes it
// again, says so in its log, and the stall is counted in
// giving_ledger_consumer_stalls_total.

// ErrStalled ends a consuming whose watchdog found it stalled.
var ErrStalled = errors.New("the consumer received nothing while the ledger held messages for it; torn down to be made again")

// stallAfter is how long a consumer may go without a message, while the
// server holds some for it, before its watchdog tears it down.
var stallAfter = 10 * time.Second

// quietMax bounds how far a watchdog that found nothing waiting stretches
// its checks (see watchdog.quiet).
const quietMax = 5 * time.Minute

// watchdog keeps one consuming's progress.
type watchdog struct {
	// consumer names it in the metric.
	consumer string
	// quiet, when set, doubles the time to the next check each time one
	// finds nothing waiting, up to quietMax, until a message arrives: for
	// consumers of which an instance runs many, mostly idle (one per
	// webhook endpoint), so that an idle one costs the server one question
	// every few minutes rather than every few seconds.
	quiet bool
	// waiting reports whether the server holds messages the consumer has
	// not received; an error (the server away) says nothing either way.
	waiting func(context.Context) (bool, error)
	moved   atomic.Int64 // when a message last arrived or a handler last returned, in Unix nanoseconds
	busy    atomic.Int32 // handlers running
}

func newWatchdog(consumer string, waiting func(context.Context) (bool, error)) *watchdog {
	w := &watchdog{consumer: consumer, waiting: waiting}
	w.moved.Store(time.Now().UnixNano())
	return w
}

// arrived notes a message received.
func (w *watchdog) arrived() {
	if w != nil {
		w.moved.Store(time.Now().UnixNano())
	}
}

// handle runs a handler, during which the consumer is not stalled.
func (w *watchdog) handle(f func() error) error {
	if w == nil {
		return f()
	}
	w.busy.Add(1)
	defer func() {
		w.moved.Store(time.Now().UnixNano())
		w.busy.Add(-1)
	}()
	return f()
}

// stalled reports whether the consumer has been idle past stallAfter
// while messages wait for it, and whether it asked the server.
func (w *watchdog) stalled(ctx context.Context, now time.Time) (stalled, asked bool) {
	if w.busy.Load() > 0 || now.Sub(time.Unix(0, w.moved.Load())) < stallAfter {
		return false, false
	}
	waiting, err := w.waiting(ctx)
	return err == nil && waiting, true
}

// watch checks the consumer every half of stallAfter (stretched while
// quiet) until ctx ends, and ends the consuming through stop with
// ErrStalled once it is stalled, counting it.
func (l *Ledger) watch(ctx context.Context, w *watchdog, stop context.CancelCauseFunc) {
	every := stallAfter / 2
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			stalled, asked := w.stalled(ctx, now)
			if stalled {
				l.cfg.Metrics.ConsumerStalled(w.consumer)
				stop(ErrStalled)
				return
			}
			switch {
			case !w.quiet || now.Sub(time.Unix(0, w.moved.Load())) < stallAfter:
				every = stallAfter / 2
			case asked:
				every = min(2*every, quietMax)
			}
			t.Reset(every)
		}
	}
}
