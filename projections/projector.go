package projections

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/telemetry"
)

// maxBatch bounds how many events one bbolt transaction applies.
const maxBatch = 1000

// Projector feeds a Store from the ledger, in stream order.
type Projector struct {
	store  *Store
	ledger *eventlog.Ledger
	log    zerolog.Logger

	// runMu is held by the follow loop while it runs; Rebuild takes it to
	// stop the loop for the swap.
	runMu   sync.Mutex
	pauseMu sync.Mutex
	pause   context.CancelFunc
	// resumed is set while a rebuild holds the loop, and closed when the
	// rebuild lets go. Without it the loop, once cancelled, would take
	// runMu straight back and keep the rebuild waiting.
	resumed chan struct{}
	// rebuildMu lets one rebuild run at a time: they share a file name.
	rebuildMu sync.Mutex
}

// NewProjector returns a projector that feeds store from ledger.
func NewProjector(store *Store, ledger *eventlog.Ledger, log zerolog.Logger) *Projector {
	return &Projector{store: store, ledger: ledger, log: log}
}

// Run follows the ledger until ctx ends, resuming from the store's
// checkpoint. Errors are logged and the loop restarts from the checkpoint, so
// nothing is skipped.
func (p *Projector) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := p.followOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Error().Err(err).Uint64("applied", p.store.Applied()).Msg("projector stopped; restarting from checkpoint")
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func (p *Projector) followOnce(ctx context.Context) error {
	p.pauseMu.Lock()
	resumed := p.resumed
	p.pauseMu.Unlock()
	if resumed != nil {
		select {
		case <-resumed:
		case <-ctx.Done():
			return nil
		}
	}
	p.runMu.Lock()
	defer p.runMu.Unlock()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.pauseMu.Lock()
	if p.resumed != nil {
		// A rebuild began since the check above; let it have the loop.
		p.pauseMu.Unlock()
		return nil
	}
	p.pause = cancel
	p.pauseMu.Unlock()
	err := p.follow(runCtx)
	if runCtx.Err() != nil && ctx.Err() == nil {
		return nil // paused for a swap; the caller loops and resumes
	}
	return err
}

func (p *Projector) follow(ctx context.Context) error {
	if err := p.catchUpInSpans(ctx); err != nil {
		return err
	}
	// With nothing to apply, the loop merges the deposit runs a rebuild
	// left (see runs.go). A merge that fails leaves them, read as they are,
	// and does not stop the loop: the events still get applied.
	merge := p.store.runsMerger()
	idle := func() (bool, error) {
		more, err := merge()
		if err != nil {
			p.log.Error().Err(err).Msg("merging the deposit runs a rebuild left failed; they stay, and deposits are read from them")
		}
		return more, nil
	}
	pl := p.store.startPipelineEnding(func(recs []eventlog.Record, evs []domain.Event) error {
		return p.apply(ctx, recs, evs)
	}, nil, idle, nil, pipelineDepth)
	return followInto(ctx, p.ledger, pl, maxBatch, nil)
}

// catchUpInSpans applies what the ledger holds past the checkpoint as a
// rebuild does (applyInSpans), when that is at least spanCatchUpAt
// events: a file discarded after the machine went down, or an instance
// that was stopped while others wrote. Applied a batch to a transaction,
// as the follow loop does to answer requests soon, each commit rewrote
// the last pages of every partner's feed, feed types and public events the
// batch touched: at a million events over 1,000 partners, 24-26k events/s
// against a rebuild's ~93k (measured with giving bench). Waiters (WaitFor)
// hear of each span's commit. A failure or a pause drops the open span
// only; the checkpoint is the last commit's, and the loop resumes from it.
func (p *Projector) catchUpInSpans(ctx context.Context) error {
	last, err := p.ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	if applied := p.store.Applied(); last < applied+spanCatchUpAt {
		return nil
	}
	return applyInSpans(ctx, p.ledger, p.store, last, catchUpSpan, catchUpDepth, nil)
}

// spanCatchUpAt is how far behind the ledger the follow loop starts to
// catch up in spans: four of a rebuild's batches.
const spanCatchUpAt = 4 * rebuildBatch

// catchUpSpan is how many events a catch-up's transaction applies: a fifth
// of a rebuild's, since the instance serves meanwhile and a span's pages,
// keys and envelopes stay in memory until its commit.
const catchUpSpan = spanEvents / 5

// maxLinks bounds the links of one apply span (the SDK's default limit).
const maxLinks = 128

// apply applies one batch. A batch holding events appended under a traced
// request gets a span linked to each of those appends, so a request's trace
// shows when its write reached this instance's read side.
func (p *Projector) apply(ctx context.Context, recs []eventlog.Record, evs []domain.Event) error {
	var links []trace.Link
	for _, r := range recs {
		if l, ok := telemetry.LinkTo(r.Trace); ok && len(links) < maxLinks {
			links = append(links, l)
		}
	}
	if len(links) == 0 {
		return p.store.applyDecoded(recs, evs)
	}
	_, span := telemetry.Start(ctx, "projector.apply", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("giving.events", len(recs)),
			attribute.Int64("giving.first_seq", int64(recs[0].Seq)), attribute.Int64("giving.last_seq", int64(recs[len(recs)-1].Seq))))
	err := p.store.applyDecoded(recs, evs)
	telemetry.End(span, err)
	return err
}

// CatchUp blocks until the store has applied everything the ledger held when
// it was called.
func (p *Projector) CatchUp(ctx context.Context) error {
	last, err := p.ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	return p.store.WaitFor(ctx, last)
}

// Progress reports how far a rebuild has come.
type Progress func(applied, total uint64)

// Rebuild replays the whole ledger into a new file next to the live one,
// then stops the follow loop, swaps the new file in atomically and lets the
// loop resume from the new file's checkpoint. When it fails or ctx ends
// first, it removes the new file and leaves the live one as it was.
func (p *Projector) Rebuild(ctx context.Context, progress Progress) (err error) {
	p.rebuildMu.Lock()
	defer p.rebuildMu.Unlock()
	tmp := p.store.Path() + ".rebuild"
	defer func() {
		if err != nil {
			if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("rebuild: %w", rmErr))
			}
		}
	}()
	if err := BuildFile(ctx, p.ledger, tmp, progress); err != nil {
		return err
	}
	resumed := make(chan struct{})
	p.pauseMu.Lock()
	p.resumed = resumed
	if p.pause != nil {
		p.pause()
	}
	p.pauseMu.Unlock()
	defer func() {
		p.pauseMu.Lock()
		p.resumed = nil
		p.pauseMu.Unlock()
		close(resumed)
	}()
	p.runMu.Lock()
	defer p.runMu.Unlock()
	// Apply what arrived while building, so the swap never steps back.
	if err := catchUpFile(ctx, p.ledger, tmp, nil); err != nil {
		return err
	}
	return p.store.swap(tmp)
}

// BuildFile replays the ledger from sequence 1 into a fresh file at path.
func BuildFile(ctx context.Context, ledger *eventlog.Ledger, path string, progress Progress) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rebuild: %w", err)
	}
	return catchUpFile(ctx, ledger, path, progress)
}

// rebuildBatch is how many events a rebuild reads at a time; a transaction
// applies batches until it holds spanEvents (see txSpan). Each batch read,
// decoded or waiting is held in memory, and so are the batches of the open
// transaction.
const rebuildBatch = 5000

// catchUpFile applies the ledger to the file at path up to the ledger's last
// sequence when it starts. It reads with an ordered consumer (the server
// streams the ledger in order, no per-batch filter or pending count),
// through a pipeline (the next batch is read and decoded while the previous
// one is applied), in transactions of many batches (txSpan), and commits
// without syncing each transaction;
// the file is synced once at the end, before it can be swapped in, which is
// safe because a file that did not finish is removed, never used. The
// deposits it wrote as runs are merged into their table by the follow loop
// that serves from the file (see runs.go).
func catchUpFile(ctx context.Context, ledger *eventlog.Ledger, path string, progress Progress) error {
	s, err := openRebuild(path)
	if err != nil {
		return err
	}
	defer s.Close()
	total, err := ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	if s.Applied() < total {
		s.db.NoSync = true
		if err := applyInSpans(ctx, ledger, s, total, spanEvents, rebuildDepth, progress); err != nil {
			return err
		}
		s.db.NoSync = false
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("rebuild: sync: %w", err)
		}
	}
	if progress != nil {
		progress(s.Applied(), total)
	}
	return nil
}

// applyInSpans applies the ledger to s up to sequence total through a
// pipeline holding up to depth batches, in transactions of every events or
// more (txSpan). When s does not sync its commits, each commit starts
// writing the file back in the background, and the writes are synced
// before it returns.
func applyInSpans(ctx context.Context, ledger *eventlog.Ledger, s *Store, total uint64, every, depth int, progress Progress) (err error) {
	span := s.newTxSpan(every)
	span.syncAhead = s.db.NoSync
	defer func() {
		if syncErr := span.waitSync(); syncErr != nil && err == nil {
			err = fmt.Errorf("projections: sync: %w", syncErr)
		}
	}()
	var applied func()
	if progress != nil {
		applied = func() { progress(span.last, total) }
	}
	// The label marks the goroutines (reader, decoders, applier) in a CPU
	// profile: go tool pprof -tagfocus projections=rebuild.
	pprof.Do(ctx, pprof.Labels("projections", "rebuild"), func(ctx context.Context) {
		pl := s.startPipelineEnding(span.apply, span.end, span.flush, applied, depth)
		err = followInto(ctx, ledger, pl, rebuildBatch, func(last uint64) bool { return last >= total })
	})
	if err != nil {
		return fmt.Errorf("projections: read after %d: %w", s.Applied(), err)
	}
	if s.Applied() < total {
		return fmt.Errorf("projections: read stopped at %d of %d", s.Applied(), total)
	}
	return nil
}
