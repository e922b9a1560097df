package probe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// What giving bench needs of the ledger beyond the service's own use: a
// fast fill of real events, and a raw ordered read to compare the
// service's reads with.

// fillPublishers is how many publishes a Fill has in flight.
const fillPublishers = 64

// Fill appends events as fast as the server takes them, for benchmarks:
// many publishes at once, no expected-sequence condition (every event must
// start or continue an aggregate nobody else writes). A fill stands for
// history, so its events carry no dedup id: the server keeps the ids of the
// last Config.Duplicates of writes (15 minutes) and rebuilds them at every
// start, which for a production ledger is its last 15 minutes, never its
// history; a fill minutes old with ids would make the next start rebuild a
// table of every id in it. Without an id a publish cannot be retried
// safely, so a lost answer fails the fill. It returns each event's
// sequence, in the order of events (the ledger's order may differ). On a
// ledger opened with Unsynced, nothing is synced per write.
func Fill(ctx context.Context, l *eventlog.Ledger, events []domain.Event) ([]uint64, error) {
	seqs := make([]uint64, len(events))
	var next atomic.Int64
	errs := make(chan error, fillPublishers)
	var wg sync.WaitGroup
	for range min(fillPublishers, len(events)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(events) || ctx.Err() != nil {
					return
				}
				seq, err := fillOne(ctx, l, events[i])
				if err != nil {
					errs <- err
					return
				}
				seqs[i] = seq
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return seqs, ctx.Err()
}

// fillOne publishes one event.
func fillOne(ctx context.Context, l *eventlog.Ledger, ev domain.Event) (uint64, error) {
	msg, err := l.Message(ev)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ack, err := l.JetStream().PublishMsg(pctx, msg, jetstream.WithExpectStream(l.Name()))
	if err != nil {
		return 0, eventlog.NATSErr("fill", err)
	}
	return ack.Sequence, nil
}

// RawRead is what a raw ordered read achieved.
type RawRead struct {
	Messages int
	Elapsed  time.Duration
}

// Rate is messages per second.
func (r RawRead) Rate() float64 { return float64(r.Messages) / r.Elapsed.Seconds() }

// ReadRaw reads every stored event matching filter (Subjects.All, Public,
// ...), oldest first, with an ordered consumer, decoding nothing: the
// fastest way the server hands the ledger out, which the service's reads
// are compared with.
func ReadRaw(ctx context.Context, l *eventlog.Ledger, filter string) (RawRead, error) {
	start := time.Now()
	last, err := l.LastOf(ctx, filter)
	if err != nil || last == 0 {
		return RawRead{Elapsed: time.Since(start)}, err
	}
	cons, err := l.Stream().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return RawRead{}, eventlog.NATSErr("raw read", err)
	}
	defer dropOrdered(ctx, l, cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return RawRead{}, eventlog.NATSErr("raw read", err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			return RawRead{}, eventlog.NATSErr("raw read", err)
		}
		n++
		meta, err := m.Metadata()
		if err != nil {
			return RawRead{}, fmt.Errorf("raw read: %w", err)
		}
		if meta.Sequence.Stream >= last {
			return RawRead{Messages: n, Elapsed: time.Since(start)}, nil
		}
	}
}

// RawFed is what a bare handler fed from the ledger achieved (FeedRaw).
type RawFed struct {
	Messages int // handed to the handler and acknowledged (sent; not awaited)
	Failed   int // of them, those the handler reported failed
	Elapsed  time.Duration
}

// FeedRaw hands the n messages stored from sequence from on to handle,
// reading the ledger as the service's webhook dispatch does and no more: a
// durable pull consumer with explicit acknowledgements, unfiltered like
// OpenSharedReader's and fetching fetch messages at a time (the fan-out's
// batch), feeds slots goroutines, each acknowledging a message once handle
// returns; beside it an ordered consumer reads the same messages and drops
// them, as the projector reads each event the dispatch waits for. Nothing
// is decoded or applied. It is the floor of that design: the bench sets
// the dispatch beside it and beside a bare loop of the same handler, to
// tell what reading the ledger costs from what the service adds. Both
// consumers are deleted afterwards.
func FeedRaw(ctx context.Context, l *eventlog.Ledger, from uint64, n, fetch, slots int, handle func(data []byte) bool) (RawFed, error) {
	if from == 0 || n <= 0 || fetch <= 0 || slots <= 0 {
		return RawFed{}, fmt.Errorf("raw feed: from %d, %d messages, %d a fetch, %d at once: each must be positive", from, n, fetch, slots)
	}
	// Fewer stored than asked for would leave the readers waiting.
	last, err := l.LastSeq(ctx)
	if err != nil {
		return RawFed{}, err
	}
	if want := from + uint64(n) - 1; last < want {
		return RawFed{}, fmt.Errorf("raw feed: messages %d to %d asked for, the ledger ends at %d", from, want, last)
	}
	name := "bench-fed-" + ksuid.New().String()
	cons, err := l.Stream().CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
	})
	if err != nil {
		return RawFed{}, eventlog.NATSErr("raw feed consumer", err)
	}
	defer dropConsumer(ctx, l, name)
	ordered, err := l.Stream().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
	})
	if err != nil {
		return RawFed{}, eventlog.NATSErr("raw feed ordered consumer", err)
	}
	defer dropOrdered(ctx, l, ordered)
	start := time.Now()
	// A missing heartbeat does not end the durable's iterator, as it does
	// not SharedReader's: the workers hold the reader back under load.
	it, err := cons.Messages(jetstream.PullMaxMessages(fetch), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		return RawFed{}, eventlog.NATSErr("raw feed", err)
	}
	defer it.Stop()
	// As many a pull as ReadRaw's ordered read asks for.
	oit, err := ordered.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return RawFed{}, eventlog.NATSErr("raw feed", err)
	}
	defer oit.Stop()
	next := jetstream.NextContext(ctx)
	readErr := make(chan error, 2) // one from each reader
	go func() {
		for range n {
			if _, err := oit.Next(next); err != nil {
				readErr <- err
				return
			}
		}
		readErr <- nil
	}()
	msgs := make(chan jetstream.Msg, fetch)
	go func() {
		defer close(msgs)
		for range n {
			m, err := it.Next(next)
			if err != nil {
				readErr <- err
				return
			}
			msgs <- m
		}
		readErr <- nil
	}()
	var handled, failed atomic.Int64
	var wg sync.WaitGroup
	for range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range msgs {
				if !handle(m.Data()) {
					failed.Add(1)
				}
				if err := m.Ack(); err == nil {
					handled.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// The durable's reader has stopped (msgs is closed): wait for the
	// ordered one too, so that the elapsed time covers both reads.
	for range 2 {
		if err := <-readErr; err != nil {
			if ctx.Err() != nil {
				return RawFed{}, ctx.Err()
			}
			return RawFed{}, eventlog.NATSErr("raw feed", err)
		}
	}
	return RawFed{Messages: int(handled.Load()), Failed: int(failed.Load()), Elapsed: time.Since(start)}, nil
}

// dropOrdered deletes an ordered consumer a raw read made, once it is
// stopped, rather than leave it on the server until it has been idle for
// its inactive threshold (5 minutes), through the measures that follow.
func dropOrdered(ctx context.Context, l *eventlog.Ledger, c jetstream.Consumer) {
	if info := c.CachedInfo(); info != nil {
		dropConsumer(ctx, l, info.Name)
	}
}

// dropConsumer deletes a consumer a raw read made, even when ctx has
// ended.
func dropConsumer(ctx context.Context, l *eventlog.Ledger, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = l.Stream().DeleteConsumer(dctx, name)
}
