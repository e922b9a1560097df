package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/telemetry"
)

// Group commit. Every append is synced to disk before it is acknowledged,
// and a synced write is the ledger's unit of cost. While few appends are
// under way each is published on its own, as it always was. Once more than
// Config.GroupCommitAt (16) are in flight, the appends that arrive are gathered and
// stored as one JetStream atomic batch (Nats-Batch-Id, AllowAtomicPublish),
// which the server makes durable with one sync: one batch at a time, as
// large as the queue behind it, because that is the only shape in which a
// batch is cheaper than the singles (BENCHMARKS.md, "Current figures").
//
// Each append keeps its own optimistic-concurrency guard and dedup id. An
// atomic batch fails as a whole when one of its messages fails a check, so
// when the server refuses a batch (storing none of it) every member is
// published again on its own: the one whose check fails gets its own
// conflict or duplicate, the others are stored. A batch whose answer is lost
// leaves each member's outcome unknown, as a lost answer to a single publish
// does. A batch never holds two appends to
// the same aggregate or with the same dedup id: the server checks every
// member against the stream as it was before the batch, so the second of
// two appends expecting the same last sequence would pass.

// DefaultGroupCommitAt is how many appends may be in flight before the
// next ones wait to share a batch. Below it a batch costs more than the
// singles it replaces (BENCHMARKS.md, "Current figures").
const DefaultGroupCommitAt = 16

// maxGroup bounds one batch (the server's limit is 1,000 messages).
const maxGroup = 256

// groupTimeout bounds one batch's publish; an append waiting for it gives
// up sooner if its own context ends.
const groupTimeout = 10 * time.Second

type groupCommit struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	metrics *telemetry.Metrics
	// at is Config.GroupCommitAt.
	at       int64
	inflight atomic.Int64

	// rounds stores the queue batch after batch until it is empty; its
	// lock guards queue.
	rounds batcher[[]*queuedAppend]
	queue  []*queuedAppend
}

func newGroupCommit(js jetstream.JetStream, nc *nats.Conn, metrics *telemetry.Metrics, at int) *groupCommit {
	g := &groupCommit{js: js, nc: nc, metrics: metrics, at: int64(at)}
	g.rounds.take = func() ([]*queuedAppend, bool) {
		batch := g.take()
		return batch, len(batch) > 0
	}
	g.rounds.do = g.store
	return g
}

// queuedAppend is one append waiting for a batch.
type queuedAppend struct {
	// ctx is the caller's: once it ends the append is never published,
	// so a caller that gave up (a deadline it must append by, see
	// Command) knows nothing of it is stored after.
	ctx          context.Context
	msg          *nats.Msg
	guard, dedup string
	done         chan groupOutcome
}

type groupOutcome struct {
	ack *jetstream.PubAck
	err error
}

// publish stores msg, whose headers already carry its dedup id, expected
// stream and guard, alone or in a batch, and returns the server's answer
// for it.
func (g *groupCommit) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	defer g.inflight.Add(-1)
	if g.inflight.Add(1) <= g.at {
		ack, err := g.js.PublishMsg(ctx, msg)
		if err == nil && !ack.Duplicate {
			g.metrics.LedgerBatch(1)
		}
		return ack, err
	}
	q := &queuedAppend{
		ctx: ctx, msg: msg, guard: msg.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader), dedup: msg.Header.Get(jetstream.MsgIDHeader),
		done: make(chan groupOutcome, 1),
	}
	g.rounds.queue(func() { g.queue = append(g.queue, q) })
	select {
	case o := <-q.done:
		return o.ack, o.err
	case <-ctx.Done():
		// Whether the batch stores it is unknown here (one taken before
		// ctx ended is published); a retry under the same dedup id finds
		// out.
		return nil, ctx.Err()
	}
}

// take removes the next batch from the queue, in arrival order, leaving
// behind an append whose aggregate or dedup id the batch already holds,
// and dropping one whose caller gave up.
func (g *groupCommit) take() []*queuedAppend {
	var (
		batch  []*queuedAppend
		rest   = g.queue[:0]
		guards = map[string]bool{}
		dedups = map[string]bool{}
	)
	for _, q := range g.queue {
		if q.ctx.Err() != nil {
			continue
		}
		if len(batch) == maxGroup || (q.guard != "" && guards[q.guard]) || dedups[q.dedup] {
			rest = append(rest, q)
			continue
		}
		if q.guard != "" { // an unguarded append (Command.Unordered) checks nothing of its aggregate
			guards[q.guard] = true
		}
		dedups[q.dedup] = true
		batch = append(batch, q)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return batch
}

// store publishes one batch and hands each member its answer.
func (g *groupCommit) store(batch []*queuedAppend) {
	if len(batch) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
		acks, err := g.atomic(ctx, batch)
		cancel()
		var refused *jetstream.APIError
		switch {
		case err == nil:
			g.metrics.LedgerBatch(len(batch))
			for i, q := range batch {
				q.done <- groupOutcome{ack: acks[i]}
			}
			return
		case !errors.As(err, &refused):
			// The answer was lost: the batch may have been stored. Each
			// append is left as a single publish whose answer was lost
			// would be (unknown; the caller's retry under the same dedup
			// id finds out), never published again behind its back.
			for _, q := range batch {
				q.done <- groupOutcome{err: err}
			}
			return
		}
	}
	// One append alone, or a batch the server refused (it stored none of
	// it): each on its own, at once, unless its caller gave up meanwhile.
	var wg sync.WaitGroup
	for _, q := range batch {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(q.ctx, groupTimeout)
			defer cancel()
			ack, err := g.js.PublishMsg(ctx, q.msg)
			if err == nil && !ack.Duplicate {
				g.metrics.LedgerBatch(1)
			}
			q.done <- groupOutcome{ack: ack, err: err}
		})
	}
	wg.Wait()
}

// batchAck is the server's answer to an atomic batch's commit.
type batchAck struct {
	Error    *jetstream.APIError `json:"error"`
	Stream   string              `json:"stream"`
	Sequence uint64              `json:"seq"`
	Count    int                 `json:"count"`
}

// atomic stores batch as one atomic batch and returns each member's
// acknowledgement: the batch is stored contiguously, its commit (the last
// member) at the sequence the answer names. A *jetstream.APIError means the
// server refused the batch and stored none of it; any other error leaves
// the outcome unknown.
func (g *groupCommit) atomic(ctx context.Context, batch []*queuedAppend) ([]*jetstream.PubAck, error) {
	id := ksuid.New().String()
	var reply *nats.Msg
	for i, q := range batch {
		m := nats.NewMsg(q.msg.Subject)
		m.Data = q.msg.Data
		for k, v := range q.msg.Header {
			m.Header[k] = v
		}
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i < len(batch)-1 {
			if err := g.nc.PublishMsg(m); err != nil {
				return nil, err
			}
			continue
		}
		m.Header.Set(batchCommitHeader, "1")
		var err error
		if reply, err = g.nc.RequestMsgWithContext(ctx, m); err != nil {
			return nil, err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return nil, fmt.Errorf("batch %s: %w", id, err)
	}
	if ack.Error != nil {
		return nil, ack.Error
	}
	if ack.Count != len(batch) || ack.Sequence < uint64(len(batch)) {
		return nil, fmt.Errorf("batch %s: the server answered a count of %d for %d", id, ack.Count, len(batch))
	}
	first := ack.Sequence - uint64(len(batch)) + 1
	acks := make([]*jetstream.PubAck, len(batch))
	for i := range batch {
		acks[i] = &jetstream.PubAck{Stream: ack.Stream, Sequence: first + uint64(i)}
	}
	return acks, nil
}

// JetStream's atomic batch headers (nats-server 2.12+).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)
