package eventlog

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// What giving bench needs of the ledger beyond the service's own use: a
// fast fill of real events, and a raw ordered read to compare the
// service's reads with.

// fillInFlight bounds the publishes a Fill has in flight.
const fillInFlight = 4096

// Fill appends events as fast as the server takes them, for benchmarks:
// many publishes in flight, no expected-sequence condition (every event
// must start or continue an aggregate nobody else writes), each event's id
// as its dedup id. It returns each event's sequence, in order. On a ledger
// opened with Unsynced, nothing is synced per write.
func (l *Ledger) Fill(ctx context.Context, events []domain.Event) ([]uint64, error) {
	futures := make([]jetstream.PubAckFuture, len(events))
	for i, ev := range events {
		subject, err := l.subjects.Event(ev)
		if err != nil {
			return nil, err
		}
		data, err := ev.Envelope()
		if err != nil {
			return nil, err
		}
		msg := nats.NewMsg(subject)
		msg.Data = data
		if futures[i], err = l.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID)); err != nil {
			return nil, natsErr("fill", err)
		}
		if i >= fillInFlight {
			if _, err := awaitAck(ctx, futures[i-fillInFlight]); err != nil {
				return nil, err
			}
		}
	}
	seqs := make([]uint64, len(events))
	for i, f := range futures {
		ack, err := awaitAck(ctx, f)
		if err != nil {
			return nil, err
		}
		seqs[i] = ack.Sequence
	}
	return seqs, nil
}

func awaitAck(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, natsErr("fill", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
func (l *Ledger) ReadRaw(ctx context.Context, filter string) (RawRead, error) {
	start := time.Now()
	last, err := l.LastOf(ctx, filter)
	if err != nil || last == 0 {
		return RawRead{Elapsed: time.Since(start)}, err
	}
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return RawRead{}, natsErr("raw read", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return RawRead{}, natsErr("raw read", err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			return RawRead{}, natsErr("raw read", err)
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
