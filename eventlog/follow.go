package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/telemetry"
)

// Follow reads the ledger in order from sequence from (1 for the start) and
// hands the records to handle in batches of at most batch records, until ctx ends (it
// then returns ctx's error), the read fails, or handle returns an error. A
// batch is whatever has arrived when handle is free and, while the server
// says more records are stored past the last one, those too (for at most
// gatherWait), so a backlog is handled in full batches and a trickle
// without delay. Each caller has its own position: nothing is shared with
// other followers or instances.
func (l *Ledger) Follow(ctx context.Context, from uint64, batch int, handle func([]Record) error) error {
	cons, err := SetUp(ctx, "follow", func(ctx context.Context) (jetstream.Consumer, error) {
		return l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{l.subjects.All()},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    max(from, 1),
		})
	})
	if err != nil {
		return err
	}
	// The watchdog tears the follower down when the ledger holds events
	// past the last one it received and nothing comes (watchdog.go).
	var received atomic.Uint64
	received.Store(max(from, 1) - 1)
	w := newWatchdog(telemetry.ConsumerFollower, func(ctx context.Context) (bool, error) {
		last, err := l.LastSeq(ctx)
		return last > received.Load(), err
	})
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go l.watch(ctx, w, stop)
	// An ordered consumer recovers from a pull the server never answered
	// (as on a cluster whose stream was just created) by making itself again
	// once two heartbeats are missed: at nats.go's default of 5 s, a new
	// instance's projections could sit 10 s at 0. A heartbeat a second
	// costs an idle follower one small message a second.
	err = consumeBatches(ctx, cons, batch, gatherWait, nil, w, func(msgs []jetstream.Msg) error {
		recs := make([]Record, 0, len(msgs))
		for _, m := range msgs {
			rec, err := l.recordOfMsg(m)
			if err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		received.Store(recs[len(recs)-1].Seq)
		return handle(recs)
	}, jetstream.PullHeartbeat(followHeartbeat))
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
		return fmt.Errorf("follow from %d: %w", received.Load()+1, cause)
	}
	return err
}

// followHeartbeat is how often the server tells an idle follower it is
// still there (see Follow).
const followHeartbeat = time.Second

// Delivery is one public event handed out by a SharedReader. It must be
// settled once: Ack when done with it, Retry to have it handed out again
// (to any instance) after a delay, Drop when it can never be handled.
type Delivery struct {
	Record Record
	msg    jetstream.Msg
	r      *SharedReader
	out    *handedOut
}

// Ack settles the delivery as done.
func (d Delivery) Ack() {
	d.r.settled(d.out)
	if d.msg.Ack() == nil {
		d.r.acked(d.msg)
	}
}

// Retry has the event handed out again after delay.
func (d Delivery) Retry(delay time.Duration) {
	d.r.settled(d.out)
	_ = d.msg.NakWithDelay(delay)
}

// Drop settles a delivery that can never be handled.
func (d Delivery) Drop() {
	d.r.settled(d.out)
	_ = d.msg.Term()
}

// handedOut is a delivery handed to the handler and not settled yet.
type handedOut struct {
	msg   jetstream.Msg
	since time.Time
}

// SharedReader is a durable position in the partners' public events, shared
// by every instance that opens it under the same name: each event is handed
// to one of them and stays due until one acknowledges it, so the position
// survives restarts and moves between instances.
type SharedReader struct {
	l    *Ledger
	cons jetstream.Consumer
	// unreadable reports a message that does not parse as a ledger record.
	unreadable func(error)
	// ackedSubject is the acknowledgement subject of a message this
	// reader has acknowledged (the first one), for Settled.
	ackedSubject atomic.Pointer[string]
	// hold and maxHold are the config's Hold and MaxHold; out holds the
	// deliveries handed out and not settled, which keepAlive speaks for.
	hold, maxHold time.Duration
	mu            sync.Mutex
	out           map[*handedOut]struct{}
}

// SharedReaderConfig tunes a shared reader.
type SharedReaderConfig struct {
	Name, Description string
	// Hold is how long an event handed out may go unsettled, with no word
	// from the instance that has it, before it is handed out again (to
	// any instance): how long the events of an instance that died wait.
	Hold time.Duration
	// MaxHold, when longer than Hold, is how long an instance may keep an
	// event it has not settled: while it does, the reader tells the
	// server it still works on the event, every third of Hold, until
	// MaxHold has passed since the event was handed out (a handler that
	// lost it lets it go then).
	MaxHold time.Duration
	// MaxOut bounds the events handed out and not yet settled, across every
	// instance.
	MaxOut int
}

// OpenSharedReader creates (or updates) a shared reader over every
// partner's public events, from the first event on. unreadable hears of a
// message that is not a ledger record.
func (l *Ledger) OpenSharedReader(ctx context.Context, cfg SharedReaderConfig, unreadable func(error)) (*SharedReader, error) {
	name := cfg.Name
	cons, err := SetUp(ctx, "shared reader "+name, func(ctx context.Context) (jetstream.Consumer, error) {
		return l.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:     name,
			Description: cfg.Description,
			// No filter: the reader settles the internal events itself
			// (Consume). A filter on the public subjects made the server,
			// at every delivery, look through the subject state of the
			// block for the earliest match (nats-server 2.15,
			// msgBlock.firstMatching), ~34 µs a delivery once a block
			// holds a thousand partners' deposit books: the fan-out's
			// walk of a million events on a fresh consumer took 38–40 s.
			// Unfiltered, the server hands out the next message as it
			// lies. Updating a reader made before drops its filter and
			// keeps its position.
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.Hold,
			MaxAckPending: cfg.MaxOut,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	})
	if err != nil {
		return nil, err
	}
	return &SharedReader{l: l, cons: cons, unreadable: unreadable, hold: cfg.Hold, maxHold: cfg.MaxHold, out: map[*handedOut]struct{}{}}, nil
}

// handOut notes a delivery handed to the handler, for keepAlive.
func (r *SharedReader) handOut(m jetstream.Msg, now time.Time) *handedOut {
	if !r.keepsAlive() {
		return nil
	}
	h := &handedOut{msg: m, since: now}
	r.mu.Lock()
	r.out[h] = struct{}{}
	r.mu.Unlock()
	return h
}

// settled forgets a delivery that is being settled.
func (r *SharedReader) settled(h *handedOut) {
	if h == nil {
		return
	}
	r.mu.Lock()
	delete(r.out, h)
	r.mu.Unlock()
}

// keepsAlive reports whether the reader keeps what it handed out alive:
// when its MaxHold is longer than its hold.
func (r *SharedReader) keepsAlive() bool { return r.maxHold > r.hold }

// keepAlive tells the server, every third of the hold, that the events
// handed out here and not settled are still being worked on, so that the
// hold can be short (an instance that dies holds its events that long)
// while an event may wait here longer (behind a slow endpoint's backlog),
// up to MaxHold.
func (r *SharedReader) keepAlive(ctx context.Context) {
	if !r.keepsAlive() {
		return
	}
	every := r.hold / 3
	t := time.NewTicker(every)
	defer t.Stop()
	var alive []jetstream.Msg
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			alive = alive[:0]
			r.mu.Lock()
			for h := range r.out {
				// Younger than a third of the hold: the next tick comes
				// before it runs out. Past MaxHold less the hold: let it
				// run out. Past MaxHold: handed out again by now, as
				// another delivery; forgotten here.
				switch age := now.Sub(h.since); {
				case age >= r.maxHold:
					delete(r.out, h)
				case age >= every && age < r.maxHold-r.hold:
					alive = append(alive, h.msg)
				}
			}
			r.mu.Unlock()
			for _, m := range alive {
				_ = m.InProgress()
			}
		}
	}
}

// Consume hands this instance's share of the public events to handle in
// batches of at most max, until ctx ends or the reader fails; internal
// events are settled as they arrive. A message that is not a ledger record
// is reported and dropped. When the consuming ends, the events that had
// arrived and were not handed to handle are handed back, for any instance
// to have at once (consumeBatches says how sure that is); those handed
// out stay held until settled or the hold runs out. While it runs, it
// keeps the events handed out and not settled alive (keepAlive).
func (r *SharedReader) Consume(ctx context.Context, max int, handle func([]Delivery)) error {
	// A missing heartbeat is not a failure to stop on for a durable shared
	// reader: the iterator then drops what it counted as asked for and asks
	// again (the consumer is replicated and outlives a server), which is
	// what a restart would do, without the restart's pause and the
	// redelivery of what was handed out. Heartbeats went missing while
	// handle kept the iterator waiting under load: the fan-out, waiting for
	// a projector catching up on a million events, stopped and restarted
	// again and again. (An ordered consumer, which Follow uses, is
	// ephemeral: there a missing heartbeat is how the client learns to
	// make it again.) Since a missing heartbeat no longer ends the
	// iterator, a consumer gone from the server (deleted by hand, its
	// stream lost) is looked for every sharedReaderCheck: the reader then
	// fails loudly, as it did before, rather than wait in silence. It is
	// not made again here: a new durable would start from the first event
	// and send every webhook again.
	caller := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go r.watch(ctx, cancel)
	go r.keepAlive(ctx)
	// The watchdog tears the reading down when events wait on the server
	// to be handed out, there is room to hand them out, and none comes
	// (watchdog.go).
	w := newWatchdog(telemetry.ConsumerSharedReader, func(ctx context.Context) (bool, error) {
		info, err := r.cons.Info(ctx)
		if err != nil {
			return false, err
		}
		return info.NumPending > 0 && (info.Config.MaxAckPending <= 0 || info.NumAckPending < info.Config.MaxAckPending), nil
	})
	go r.l.watch(ctx, w, cancel)
	err := consumeBatches(ctx, r.cons, max, 0, &settling{early: r.internal, release: HandBack}, w, func(batch []jetstream.Msg) error {
		if err := caller.Err(); err != nil {
			// The caller's context has ended but the one made from it may
			// not have yet: a context's Done closes before the contexts
			// made from it are cancelled, and a handle that returned on
			// the caller's Done can come back here in between. Hand the
			// batch back, not out, or it is held until the hold runs out.
			for _, m := range batch {
				HandBack(m)
			}
			return err
		}
		out := make([]Delivery, 0, len(batch))
		now := time.Now()
		for _, m := range batch {
			rec, err := r.l.recordOfMsg(m)
			if err != nil {
				r.unreadable(err)
				_ = m.Term()
				continue
			}
			out = append(out, Delivery{Record: rec, msg: m, r: r, out: r.handOut(m, now)})
		}
		if len(out) > 0 {
			handle(out)
		}
		return nil
	}, jetstream.WithMessagesErrOnMissingHeartbeat(false))
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), handBackWait)
	defer stop()
	_ = r.Settled(sctx) // what it handed back, for a stop of the server that may follow
	if cause := context.Cause(ctx); errors.Is(cause, errReaderGone) || errors.Is(cause, ErrStalled) {
		return cause
	}
	return err
}

// Settled waits until the server has taken in every acknowledgement and
// hand-back this instance sent for the reader. The server takes them in
// one after another, behind the client's back: a message whose nak or ack
// was sent but not yet taken in when the server stopped (a service stop
// stops its embedded server too) is, after the restart, still held as
// handed out, until the hold runs out (10 s for the fan-out), and then
// handed out again. Settled asks the server to answer one more
// acknowledgement, on a message already acknowledged (any one: it changes
// nothing there), and the consumer takes in a client's acknowledgements in
// the order sent, so its answer comes once the earlier ones are in. Call it after
// the last settlement, before the connection closes.
func (r *SharedReader) Settled(ctx context.Context) error {
	subject := r.ackedSubject.Load()
	if subject == nil {
		return nil // nothing acknowledged: nothing handed back either, or only before a first ack
	}
	if _, err := r.l.nc.RequestWithContext(ctx, *subject, ackProgress); err != nil {
		return NATSErr("shared reader: settled", err)
	}
	return nil
}

// ackProgress is the acknowledgement that only tells the server a message
// is still being worked on; on a message no longer held it does nothing.
var ackProgress = []byte("+WPI")

// acked notes m, just acknowledged, for Settled, if no message was noted
// before: one is enough, so acknowledging costs no more than a load.
func (r *SharedReader) acked(m jetstream.Msg) {
	if r.ackedSubject.Load() != nil {
		return
	}
	subject := m.Reply()
	r.ackedSubject.CompareAndSwap(nil, &subject)
}

// HandBack hands a message back to be handed out again at once. It is a nak
// with a delay (of a millisecond), not a plain one: the server keeps a
// plain nak only in memory (its redelivery queue), so when the server
// stops too (a service stop stops its embedded server), the message stays
// held after the restart until its ack wait runs out, as if never handed
// back (a whole hold). A delayed nak moves the time the message
// was handed out, which the server stores with the consumer's state, so
// the restarted server hands it out within the delay.
func HandBack(m jetstream.Msg) { _ = m.NakWithDelay(time.Millisecond) }

// internal settles an internal event as it arrives: a shared reader hands
// out only the partners' public events. It acknowledges the message at
// once, so it is never held past a stop of this instance.
func (r *SharedReader) internal(m jetstream.Msg) bool {
	p, err := r.l.subjects.parse(m.Subject())
	if err != nil || p.Public {
		return false
	}
	if m.Ack() == nil {
		r.acked(m)
	}
	return true
}

// sharedReaderCheck is how often a consuming shared reader makes sure its
// consumer is still on the server.
var sharedReaderCheck = 15 * time.Second

var errReaderGone = errors.New("the shared reader's consumer is gone from the server")

// watch ends the consuming (through stop) when the reader's consumer is no
// longer on the server. Other failures to ask (a server away for a moment)
// are not that: it asks again at the next check.
func (r *SharedReader) watch(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(sharedReaderCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			stop(fmt.Errorf("%w: %w", errReaderGone, err))
			return
		}
	}
}

// gatherWait bounds how long Follow waits for the rest of a backlog before
// it hands over what it has. Without it a follower catching up took
// whatever had arrived, which, with the server's deliveries and the
// follower's work sharing the cores, was mostly one record: the projector
// committed ten thousand records in nine hundred transactions, most of one
// record each, and the fixed cost of each commit was most of its work.
var gatherWait = 5 * time.Millisecond

// settling is how consumeBatches settles, on a consumer whose messages
// are acknowledged, those it takes from the server and never hands to
// handle.
type settling struct {
	// early, if set, settles a message as it arrives when it is of a
	// kind handle never sees, and reports whether it did.
	early func(jetstream.Msg) bool
	// release hands a message that arrived back to the server, to be
	// handed out again at once, when the consuming ends before handle got
	// it.
	release func(jetstream.Msg)
}

// handBackWait bounds how long a consuming that ends waits for the server
// to finish sending what it had under way, to hand it back.
const handBackWait = 5 * time.Second

// consumeBatches follows a consumer and hands its messages to handle in
// batches: it waits for one message, then takes whatever else has already
// arrived, up to max, so a burst is handled in one go and a trickle without
// delay. With gather set it also waits, up to gather, for the messages the
// server says it still holds past the last one taken (nextBatch). It
// returns when ctx ends (with ctx's error), when the consumer fails, or
// when handle returns an error.
//
// With settle set (a consumer with acknowledgements), settle.early settles
// the messages handle never sees as they arrive, and when the consuming
// ends, what arrived and was not handed to handle is released: the
// iterator is drained (it stops asking and takes in what the server had
// already sent) rather than stopped, which would drop those messages and
// leave them held by the server until its ack wait runs out. That is
// certain for what had reached this client when the consuming ended; a
// message the server had taken for this client and not yet sent when the
// client gave up its interest is still held until the ack wait (the server
// drops it): at most what its queue to the client held, on a busy consumer.
func consumeBatches(ctx context.Context, cons jetstream.Consumer, max int, gather time.Duration, settle *settling, w *watchdog, handle func([]jetstream.Msg) error, opts ...jetstream.PullMessagesOpt) error {
	it, err := cons.Messages(append([]jetstream.PullMessagesOpt{jetstream.PullMaxMessages(max)}, opts...)...)
	if err != nil {
		return NATSErr("consume", err)
	}
	msgs := make(chan jetstream.Msg, max)
	errc := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				errc <- err
				return
			}
			w.arrived()
			if settle != nil && settle.early != nil && settle.early(m) {
				continue
			}
			if ctx.Err() == nil {
				select {
				case msgs <- m:
					continue
				case <-ctx.Done():
				}
			}
			if settle != nil {
				settle.release(m)
			}
		}
	}()
	var release func(jetstream.Msg)
	if settle != nil {
		release = settle.release
	}
	err = batchLoop(ctx, msgs, errc, max, gather, release, func(batch []jetstream.Msg) error {
		return w.handle(func() error { return handle(batch) })
	})
	if settle == nil {
		// Stopping an ordered consumer waits for a re-creation under way
		// to give up (up to nats.go's backoff and a create's timeout):
		// a stalled one is left to stop on its own, so that its owner
		// makes a new one at once. Nothing it holds needs handing back.
		if errors.Is(context.Cause(ctx), ErrStalled) {
			go it.Stop()
		} else {
			it.Stop()
		}
		return err
	}
	it.Drain()
	timeout := time.NewTimer(handBackWait)
	defer timeout.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return err
			}
			settle.release(m)
		case <-timeout.C:
			// The server is away: what it sent is held until its ack
			// wait, as a stop leaves it; the reading goroutine ends when
			// the connection does.
			return err
		}
	}
}

// batchLoop hands the messages arriving on msgs to handle in batches
// (nextBatch) until ctx ends, msgs closes (the consumer failed: errc says
// why) or handle fails. A batch taken as ctx ended is released, not
// handled (when release is set).
func batchLoop(ctx context.Context, msgs <-chan jetstream.Msg, errc <-chan error, max int, gather time.Duration, release func(jetstream.Msg), handle func([]jetstream.Msg) error) error {
	for {
		batch, ok := nextBatch(ctx, msgs, max, gather)
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return NATSErr("consume", <-errc)
		}
		if ctx.Err() != nil && release != nil {
			for _, m := range batch {
				release(m)
			}
			return ctx.Err()
		}
		if err := handle(batch); err != nil {
			return err
		}
	}
}

// nextBatch waits for a message, then takes those already arrived, up to
// max. With gather set, while the last one taken says the server holds
// more for the consumer (a backlog: those are on their way, with nothing to
// wait for but the server), it waits for them too, up to gather from the
// first wait, so a backlog goes in full batches; the newest message is
// never held back, since nothing is pending past it.
func nextBatch(ctx context.Context, msgs <-chan jetstream.Msg, max int, gather time.Duration) ([]jetstream.Msg, bool) {
	if ctx.Err() != nil {
		// Before a message that is ready too (a select picks either).
		return nil, false
	}
	var batch []jetstream.Msg
	select {
	case <-ctx.Done():
		return nil, false
	case m, ok := <-msgs:
		if !ok {
			return nil, false
		}
		batch = append(batch, m)
	}
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for len(batch) < max {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, true
			}
			batch = append(batch, m)
			continue
		default:
		}
		if gather <= 0 || !morePending(batch[len(batch)-1]) {
			return batch, true
		}
		if deadline == nil {
			deadline = time.NewTimer(gather)
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, true
			}
			batch = append(batch, m)
		case <-deadline.C:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}

// morePending reports whether the server held more messages for the
// consumer past m when it delivered m.
func morePending(m jetstream.Msg) bool {
	meta, err := m.Metadata()
	return err == nil && meta.NumPending > 0
}

// recordOfMsg turns a message delivered by a consumer on the ledger stream
// into a Record.
func (l *Ledger) recordOfMsg(msg jetstream.Msg) (Record, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return Record{}, fmt.Errorf("ledger message metadata: %w", err)
	}
	return l.record(meta.Sequence.Stream, msg.Subject(), meta.Timestamp, msg.Headers(), msg.Data())
}

// Behind reports how many events this reader has not yet had settled, over
// every instance: those not handed out yet and those handed out and
// unsettled.
func (r *SharedReader) Behind(ctx context.Context) (uint64, error) {
	info, err := r.cons.Info(ctx)
	if err != nil {
		return 0, NATSErr("shared reader info", err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}
