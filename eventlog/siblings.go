package eventlog

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// What the sibling packages under eventlog (the vault, idempotency records,
// delivery state, presence, the bench's probes) need of the ledger: they
// keep their own buckets and streams on the ledger's JetStream, open them
// the way the ledger opens its own (SetUp, Bucket, OperationalBucket),
// and report a failure as the ledger does (NATSErr). Only packages under
// eventlog may use these; everything else gets their types.

// JetStream is the ledger's JetStream handle, for the sibling packages.
func (l *Ledger) JetStream() jetstream.JetStream { return l.js }

// Conn is the ledger's NATS connection, for the sibling packages that
// answer on it (a delivery job's acknowledgement).
func (l *Ledger) Conn() *nats.Conn { return l.nc }

// Stream is the ledger's own stream, for the bench's probes, which read
// and fill it with nothing of the service around them.
func (l *Ledger) Stream() jetstream.Stream { return l.stream }

// DirectRead returns up to n messages stored on subject in stream, one of
// the environment's other streams, oldest first, in one batched direct
// get (asked again while no replica answers, as the ledger's reads are).
// It returns ErrNotFound when none is stored.
func (l *Ledger) DirectRead(ctx context.Context, stream, subject string, n int) ([]*nats.Msg, error) {
	msgs, _, err := directMsgs(ctx, l.nc, stream, directGetRequest{Seq: 1, NextFor: subject, Batch: n})
	return msgs, err
}

// ConsumeBatches follows cons, an acknowledged consumer of a sibling's
// stream, and hands its messages to handle in batches of up to max, as the
// ledger's own readers do (consumeBatches); what arrived and was not
// handled when it ends is handed back at once (HandBack).
func ConsumeBatches(ctx context.Context, cons jetstream.Consumer, max int, handle func([]jetstream.Msg) error) error {
	return consumeBatches(ctx, cons, max, 0, &settling{release: HandBack}, nil, handle)
}

// Message is the stored form of ev on the ledger (its subject, headers and
// payload), for the bench's probes, which publish events with nothing of
// Append around them.
func (l *Ledger) Message(ev domain.Event) (*nats.Msg, error) { return l.eventMessage(ev) }

// Name is the name of the ledger's stream.
func (l *Ledger) Name() string { return l.name }

// Watchdog watches a sibling package's consumer as the ledger's own
// readers are watched (watchdog.go): one that receives nothing for a while
// with messages waiting for it is torn down, to be made again.
type Watchdog struct {
	l *Ledger
	w *watchdog
}

// NewWatchdog makes the watchdog of a consumer, named consumer in the
// stalls metric; waiting reports whether the server holds messages for
// it. A quiet one stretches its checks while nothing waits (for consumers
// an instance runs many of, mostly idle).
func (l *Ledger) NewWatchdog(consumer string, quiet bool, waiting func(context.Context) (bool, error)) *Watchdog {
	w := newWatchdog(consumer, waiting)
	w.quiet = quiet
	return &Watchdog{l: l, w: w}
}

// Arrived notes a message the consumer received.
func (d *Watchdog) Arrived() { d.w.arrived() }

// Watch checks the consumer until ctx ends, and ends the consuming through
// stop with ErrStalled once it is stalled, counting it.
func (d *Watchdog) Watch(ctx context.Context, stop context.CancelCauseFunc) {
	d.l.watch(ctx, d.w, stop)
}
