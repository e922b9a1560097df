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

// watchdog keeps one consuming's progress.
type watchdog struct {
	// consumer names it in the metric.
	consumer string
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
// while messages wait for it.
func (w *watchdog) stalled(ctx context.Context, now time.Time) bool {
	if w.busy.Load() > 0 || now.Sub(time.Unix(0, w.moved.Load())) < stallAfter {
		return false
	}
	waiting, err := w.waiting(ctx)
	return err == nil && waiting
}

// watch checks the consumer every half of stallAfter until ctx ends, and
// ends the consuming through stop with ErrStalled once it is stalled,
// counting it.
func (l *Ledger) watch(ctx context.Context, w *watchdog, stop context.CancelCauseFunc) {
	t := time.NewTicker(stallAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if w.stalled(ctx, now) {
				l.cfg.Metrics.ConsumerStalled(w.consumer)
				stop(ErrStalled)
				return
			}
		}
	}
}
