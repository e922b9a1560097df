package projections

import (
	"context"
	"errors"
	"slices"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// pipeline applies the ledger to a store in three overlapping stages: the
// ledger's reader goroutine (eventlog.Follow) receives the next batch, the
// follower decodes it on every core, and the applier goroutine runs the
// previous batch's transaction. Without it they take turns, and the
// transaction, on one goroutine by nature (bbolt has one writer), waits for
// each read and decode and they for it.
//
// Batches are applied in the order they are added, each transaction with
// its checkpoint as Store.Apply does (a transaction of its own per batch, or
// a rebuild's txSpan of many), so a crash or an error loses nothing and
// applies nothing twice: the follower restarts from the checkpoint.
type pipeline struct {
	s *Store
	// apply applies one decoded batch (Store.applyDecoded: in a
	// transaction of its own).
	apply func(recs []eventlog.Record, evs []domain.Event) error
	// end, when set, is called once the last batch is applied: it
	// commits what apply holds (ok), or drops it when the read or a
	// transaction failed (see txSpan).
	end func(ok bool) error
	// idle, when set, is called when the applier finds nothing queued,
	// before it waits, and again while it reports more to do and nothing
	// is queued: it does work apply put off (see txSpan.flush and
	// Store.runsMerger).
	idle func() (more bool, err error)
	// applied, when set, hears of each batch applied.
	applied func()
	queue   chan batch
	// failed is closed when a transaction fails; err is then set.
	failed chan struct{}
	// readOK, set before the queue is closed, says whether the read ended
	// well.
	readOK bool
	done   chan struct{}
	err    error
	// sent is the last sequence handed to the applier.
	sent uint64
}

type batch struct {
	recs []eventlog.Record
	evs  []domain.Event
}

// pipelineDepth is how many decoded batches may wait for the applier:
// one, so that the next decode overlaps the current transaction. Held at
// most: two batches in a transaction, one decoding, and what the reader
// has buffered (eventlog.Follow: a batch in flight from the server and one
// received).
const pipelineDepth = 1

// rebuildDepth is a file build's pipelineDepth. A build's transaction
// spans many batches (txSpan) and its commit, every spanEvents, takes 100
// to 250 ms, with the applier busy: the reader goes on reading and
// decoding until it has filled what it may hold, then waits. At four
// batches it waited 1.9 s of a 7.2 s read of a million events, and the
// applier 2.4 s for it between commits; twelve (60,000 events, a span and
// a fifth) keep it reading through a commit: BenchmarkRebuildMillion, six
// runs interleaved, 127-134k events/s against 120-127k at four (eight:
// 119-130k; sixteen: 122-126k, the collector marking what it holds).
// About 8 MB a batch held at the worst (1.6 KB a deposit read and decoded),
// 95 MB at twelve.
const rebuildDepth = 12

// catchUpDepth is a far-behind follow loop's pipelineDepth: its spans are
// catchUpSpan, a fifth of a build's, and four batches hold two of them;
// the instance serves meanwhile.
const catchUpDepth = 4

func (s *Store) startPipelineEnding(apply func([]eventlog.Record, []domain.Event) error, end func(ok bool) error, idle func() (bool, error), applied func(), depth int) *pipeline {
	p := &pipeline{s: s, apply: apply, end: end, idle: idle, applied: applied,
		queue: make(chan batch, depth), failed: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *pipeline) run() {
	defer close(p.done)
	p.applyQueued()
	if p.end == nil {
		return
	}
	if err := p.end(p.readOK && p.err == nil); err != nil && p.err == nil {
		p.err = err
		close(p.failed)
	}
}

// applyQueued applies the batches queued until the queue is closed.
func (p *pipeline) applyQueued() {
	for {
		b, ok := p.next()
		if !ok {
			return
		}
		if p.err != nil {
			continue // drain until the follower stops adding
		}
		// A batch that came while the previous transaction ran joins
		// this one: when the transactions are what holds the pipeline
		// up, they grow to two batches, and commit half as often. (Not
		// when apply's transactions span batches already.)
		if p.end == nil {
			select {
			case more, ok := <-p.queue:
				if ok {
					b = batch{recs: slices.Concat(b.recs, more.recs), evs: slices.Concat(b.evs, more.evs)}
				}
			default:
			}
		}
		if err := p.apply(b.recs, b.evs); err != nil {
			p.err = err
			close(p.failed)
			continue
		}
		if p.applied != nil {
			p.applied()
		}
	}
}

// next returns the next batch queued, false once the queue is closed. When
// none is queued yet it runs idle first, as long as idle has more to do
// and no batch comes.
func (p *pipeline) next() (batch, bool) {
	for more := p.idle != nil; ; {
		select {
		case b, ok := <-p.queue:
			return b, ok
		default:
		}
		if !more || p.err != nil {
			break
		}
		var err error
		if more, err = p.idle(); err != nil {
			p.err = err
			close(p.failed)
		}
	}
	b, ok := <-p.queue
	return b, ok
}

// add decodes recs (those past what the store holds or was handed) and
// queues them for the applier, waiting while the queue is full. It
// returns the applier's error once a transaction has failed.
func (p *pipeline) add(ctx context.Context, recs []eventlog.Record) error {
	recs, evs, err := decodeAfter(recs, max(p.sent, p.s.Applied()))
	if err != nil || len(recs) == 0 {
		return err
	}
	select {
	case p.queue <- batch{recs: recs, evs: evs}:
		p.sent = recs[len(recs)-1].Seq
		return nil
	case <-p.failed:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close waits for the batches queued to be applied and ended (ok: the read
// ended well) and returns the first transaction's error, if any. A
// pipeline is closed once, by its follower.
func (p *pipeline) close(ok bool) error {
	p.readOK = ok
	close(p.queue)
	<-p.done
	return p.err
}

// followInto follows the ledger from the store's checkpoint through a
// pipeline, handing batches of at most batchSize records to add, until ctx
// ends, the read or a transaction fails, or stop reports true after a
// batch was queued. It returns once every queued batch has been applied.
func followInto(ctx context.Context, ledger *eventlog.Ledger, p *pipeline, batchSize int, stop func(last uint64) bool) error {
	// A transaction failing ends the read at once, not when the next
	// batch arrives (which, at the ledger's end, may take long).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := ledger.Follow(ctx, p.s.Applied()+1, batchSize, func(recs []eventlog.Record) error {
		if err := p.add(ctx, recs); err != nil {
			return err
		}
		if stop != nil && stop(recs[len(recs)-1].Seq) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if applyErr := p.close(err == nil); applyErr != nil {
		return applyErr
	}
	return err
}

// errStop ends followInto's read of the ledger when stop says so.
var errStop = errors.New("stop")
