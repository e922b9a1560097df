package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	bucketMeta = []byte("meta")
	keyApplied = []byte("applied")
	keySchema  = []byte("schema")
)

// Schema is the version of the read models' layout. A file written with an
// older layout (say, before the feed table) is rebuilt from the ledger
// before it serves; see Outdated.
//
//	1: the first layout (no schema key)
//	2: the feed table
//	3: the donors index (the vault sweep keeps only referenced phones) and
//	   the public events by id (GET /v1/events/{id})
//	4: church balances as fixed-size counters, one key per account (a
//	   credit no longer decodes and re-encodes every account the church
//	   has seen)
//	5: the deposits by trace (a credit decides from them: deposits share
//	   one aggregate per partner, domain.DepositBook)
//	6: the feed, its types and the public events by id in a bucket per
//	   partner (partnerIndex), keyed without the partner
//	7: the feed's types in blocks of sequences (typeBlock)
//	8: the public events by id in blocks of ids (eventBlock)
//	9: the deposits by trace in blocks (depositBlock), and every block's
//	   entries with their value's length (blocks.go); a
//	   rebuilt file may serve with some of them still in runs (runs.go),
//	   which a build before could not leave: a binary from before that
//	   would read such a file's deposits as missing
//	10: the sessions by the enrollment their payroll switch names
//	   (session_switches), for the payroll vendor's webhooks
const Schema = 10

// Store is the open bbolt file plus what the projector has applied to it.
type Store struct {
	path string
	opts *bolt.Options
	// unsynced: commits skip the fsync, under a marker naming the boot
	// (durability.go); discarded: Open found the file torn by a machine
	// crash and started an empty one.
	unsynced, discarded bool
	// building: the file is being built (openRebuild); nobody reads it
	// until it is complete, so a build's spans write their deposits as
	// runs (see runs.go).
	building bool

	// mu guards db against a swap by Rebuild; readers hold it shared.
	mu sync.RWMutex
	db *bolt.DB
	// runsLeft: the file holds deposit runs a build left, not yet merged
	// (see runs.go and runsMerger).
	runsLeft atomic.Bool

	// progressMu guards applied and changed. changed is closed and
	// replaced every time a batch commits, waking everyone waiting for
	// progress.
	progressMu sync.Mutex
	applied    uint64
	changed    chan struct{}
	// appliedStored is when the ledger stored the newest event applied
	// since Open (zero before the first): see AppliedThrough.
	appliedStored time.Time
}

// Open opens or creates the projection file at path for the projector to
// keep up to date. Its commits are not synced where the kernel tells boots
// apart (see durability.go); a file left with unsynced writes by a machine
// that has restarted since is discarded (Discarded) and starts empty, to be
// caught up from the ledger.
//
// Its commits do not write bbolt's list of free pages (NoFreelistSync):
// bbolt writes the whole list at every commit, and the list follows the
// history, not the commit. A rebuild or a catch-up leaves thousands of
// pages free (the pages its last transactions rewrote, and the deposit
// runs once merged: 7,500 after a catch-up of 300,000 events, 42,000 in a
// file rebuilt at a million), and a one-event commit on a file with 11,400
// free pages wrote 195 KB instead of 99 KB and took 291 µs of the
// projector's processor time instead of 217.
// Close writes the list once, so that the next Open reads it; after a
// crash, Open rebuilds it by walking the file's pages.
func Open(path string) (*Store, error) {
	opts := &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true}
	boot := currentBoot()
	if boot == "" {
		return open(path, opts)
	}
	discarded, err := discardLostWrites(path, boot)
	if err != nil {
		return nil, err
	}
	opts.NoGrowSync = true
	s, err := open(path, opts)
	if err != nil {
		return nil, err
	}
	if err := markUnsynced(path, boot); err != nil {
		s.db.Close()
		return nil, err
	}
	s.db.NoSync, s.unsynced, s.discarded = true, true, discarded
	return s, nil
}

// Discarded reports whether Open discarded the file because the machine
// went down while it held unsynced writes.
func (s *Store) Discarded() bool { return s.discarded }

// openRebuild opens a file that a rebuild writes from scratch and syncs
// once, at the end (see catchUpFile). NoGrowSync: bbolt otherwise syncs the
// file each time it grows it (by 16 MiB at a time once past that size),
// whether or not transactions sync, which in a rebuild makes the writer
// wait for the disk every few thousand events. InitialMmapSize: bbolt
// remaps the file as it grows, doubling the mapping, and each remap copies
// the keys and values of the transaction's pages out of the old mapping.
func openRebuild(path string) (*Store, error) {
	s, err := open(path, &bolt.Options{Timeout: 2 * time.Second, NoGrowSync: true, InitialMmapSize: rebuildMmap})
	if err == nil {
		s.building = true
	}
	return s, err
}

// rebuildMmap is the mapping a rebuild starts with: address space, not
// memory.
const rebuildMmap = 256 << 20

func open(path string, opts *bolt.Options) (*Store, error) {
	db, err := openBolt(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: opts, db: db, changed: make(chan struct{})}
	if err := db.View(func(tx *bolt.Tx) error {
		s.applied = readApplied(tx)
		s.runsLeft.Store(hasRuns(tx))
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func openBolt(path string, opts *bolt.Options) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("open projections %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets() {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if readApplied(tx) == 0 && tx.Bucket(bucketMeta).Get(keySchema) == nil {
			// A new file is of the current layout.
			return tx.Bucket(bucketMeta).Put(keySchema, u64(Schema))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open projections %s: %w", path, err)
	}
	return db, nil
}

// Path is the file's location.
func (s *Store) Path() string { return s.path }

// Close closes the file, syncing it first if its commits were not.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeFreelist(); err != nil {
		return errors.Join(err, s.db.Close())
	}
	if !s.unsynced {
		return s.db.Close()
	}
	if err := s.db.Sync(); err != nil {
		return errors.Join(fmt.Errorf("close projections: sync: %w", err), s.db.Close())
	}
	if err := s.db.Close(); err != nil {
		return err
	}
	return markSynced(s.path)
}

// writeFreelist makes a last commit that writes the list of free pages the
// commits before left out (see Open), so that the next Open reads the list
// rather than walk every page of the file for it: a walk of a file of
// 200 MB took 2.1-2.3 s from a cold cache and mapped all of it into the
// process (VmRSS +183 MB).
func (s *Store) writeFreelist() error {
	if !s.db.NoFreelistSync {
		return nil
	}
	s.db.NoFreelistSync = false
	if err := s.db.Update(func(*bolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("close projections: write the free pages: %w", err)
	}
	return nil
}

// Applied is the stream sequence of the last event applied.
func (s *Store) Applied() uint64 {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	return s.applied
}

// Changed returns a channel that is closed when the next batch of events is
// applied.
func (s *Store) Changed() <-chan struct{} {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	return s.changed
}

// WaitFor blocks until the event at seq has been applied, so a read after a
// write on this instance sees the write.
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	for {
		s.progressMu.Lock()
		applied, changed := s.applied, s.changed
		s.progressMu.Unlock()
		if applied >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("projections: waiting for sequence %d (at %d): %w", seq, applied, ctx.Err())
		case <-changed:
		}
	}
}

// AppliedThrough is when the ledger stored the newest event this process
// has applied (zero before it applied any): the ledger's sequences follow
// the order it stores events in, so every event stored before then is
// applied too. A use case that needs the projections to hold every event
// older than the ledger's dedup window (the events an append's dedup id no
// longer finds) checks it instead of asking the ledger where it stands.
func (s *Store) AppliedThrough() time.Time {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	return s.appliedStored
}

// advance records that every event up to seq, the last of which the
// ledger stored at stored, is applied, and wakes the waiters.
func (s *Store) advance(seq uint64, stored time.Time) {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	if seq > s.applied {
		s.applied = seq
	}
	if stored.After(s.appliedStored) {
		s.appliedStored = stored
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// view runs fn in a read transaction.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.View(fn)
}

// Apply applies records in one transaction, together with the checkpoint.
// Records at or below the checkpoint are skipped, so redelivery is harmless.
func (s *Store) Apply(recs []eventlog.Record) error {
	// What the file already holds is skipped before decoding (the
	// transaction checks again against its own checkpoint).
	recs, evs, err := decodeAfter(recs, s.Applied())
	if err != nil || len(recs) == 0 {
		return err
	}
	return s.applyDecoded(recs, evs)
}

// decodeAfter returns the records of recs past sequence seq, decoded.
func decodeAfter(recs []eventlog.Record, seq uint64) ([]eventlog.Record, []domain.Event, error) {
	for len(recs) > 0 && recs[0].Seq <= seq {
		recs = recs[1:]
	}
	if len(recs) == 0 {
		return nil, nil, nil
	}
	evs, err := decodeAll(recs)
	return recs, evs, err
}

// applyDecoded applies records, decoded into evs, in one transaction
// together with the checkpoint.
func (s *Store) applyDecoded(recs []eventlog.Record, evs []domain.Event) error {
	var last uint64
	s.mu.RLock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		last, err = applyBatch(tx, recs, evs)
		return err
	})
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	if last > 0 {
		s.advance(last, recs[len(recs)-1].Stored)
	}
	return nil
}

// txSpan applies a rebuild's batches into one write transaction until it
// holds spanEvents events, then commits. A commit writes every page the
// transaction changed, and in a rebuild each batch changes the last page of
// every partner's feed, feed types and public events: a transaction per
// batch rewrote those thousands of pages for a few new entries each, which
// was most of a commit's cost and most of a replay's. The span's index
// writes are made together, sorted, before it commits (see indexWrites):
// made batch by batch, each batch's would be inserted among the previous
// ones' in nodes that bbolt splits only at the commit.
//
// A failure drops what the open transaction holds, and the checkpoint is
// still the last commit's; readers see the last commit, whole. It applies a
// rebuild (catchUpFile) and a far-behind follow loop's catch-up
// (Projector.catchUpInSpans).
type txSpan struct {
	s       *Store
	every   int
	tx      *bolt.Tx
	indexes *indexWrites
	counts  *counters
	// spareIndexes and spareCounts are the last transaction's, emptied,
	// for the next one (recycle).
	spareIndexes *indexWrites
	spareCounts  *counters
	held         int
	// last is the last sequence applied, committed or not; first, the
	// checkpoint the open transaction began at.
	last, first uint64
	// lastStored is when the ledger stored the event at last.
	lastStored time.Time
	// syncAhead: each commit starts a background sync (syncBehind), and
	// waitSync must be called before the file is closed. syncing is the
	// one running; syncErr, the first error one returned.
	syncAhead bool
	syncing   chan error
	syncErr   error
}

// spanEvents is how many events a rebuild's transaction applies before it
// commits: what the transaction holds (the pages it changed and the keys
// and envelopes it was given) stays in memory until then.
const spanEvents = 50_000

func (s *Store) newTxSpan(every int) *txSpan { return &txSpan{s: s, every: every, last: s.Applied()} }

// apply applies one batch in the open transaction (opening one if none is),
// and commits once the transaction holds enough events.
func (t *txSpan) apply(recs []eventlog.Record, evs []domain.Event) error {
	if t.tx == nil {
		t.s.mu.RLock()
		tx, err := t.s.db.Begin(true)
		if err != nil {
			t.s.mu.RUnlock()
			return err
		}
		indexes, counts := t.spareIndexes, t.spareCounts
		if indexes == nil {
			indexes, counts = newIndexWrites(t.every), newCounters(tx, t.every)
		}
		counts.tx, counts.runs = tx, t.s.building
		t.tx, t.indexes, t.counts, t.spareIndexes, t.spareCounts = tx, indexes, counts, nil, nil
		t.last = readApplied(tx)
		t.first = t.last
	}
	last, err := applyRecords(t.tx, t.last, recs, evs, t.indexes, t.counts)
	if err != nil {
		return errors.Join(err, t.end(false))
	}
	if last > 0 {
		t.last, t.lastStored = last, recs[len(recs)-1].Stored
		t.held += len(recs)
	}
	if t.held >= t.every {
		return t.end(true)
	}
	return nil
}

// end commits the open transaction (or rolls it back when not ok).
func (t *txSpan) end(ok bool) (err error) {
	if t.tx == nil {
		return nil
	}
	tx, indexes, counts, held := t.tx, t.indexes, t.counts, t.held
	t.tx, t.indexes, t.counts, t.held = nil, nil, nil, 0
	defer t.s.mu.RUnlock()
	defer t.recycle(indexes, counts)
	defer func() {
		if err != nil || !ok {
			t.last = t.s.Applied()
		}
	}()
	if !ok || held == 0 {
		return tx.Rollback()
	}
	if err := checkpoint(tx, indexes, counts, t.last); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	t.s.advance(t.last, t.lastStored)
	t.syncBehind()
	return nil
}

// recycle keeps a transaction's index writes and counters, emptied, for the
// next one, once it has committed or rolled back (bbolt holds what a put is
// given until then). A span's are tens of megabytes of slices and blocks;
// made afresh for every span, each was zeroed, and in a heap the runtime
// had meanwhile given back to the system, faulted in again page by page
// (5% of a replay's processor time in giving bench, perf).
func (t *txSpan) recycle(indexes *indexWrites, counts *counters) {
	indexes.reset()
	counts.reset()
	t.spareIndexes, t.spareCounts = indexes, counts
}

// syncBehind starts writing what the commits so far left unsynced to the
// disk in the background, unless a write started earlier is still going:
// a rebuild's commits are not synced (catchUpFile syncs the file once, at
// the end), and the kernel writes little back on its own (not before a
// tenth of the memory is dirty), so that one sync wrote the whole file
// while nothing else ran: 50-60 ms of a 100k-event rebuild, seconds for
// a large ledger. fdatasync runs beside the writer's pwrites (bbolt's Sync
// is the system call alone); the final sync writes only what came since.
func (t *txSpan) syncBehind() {
	if !t.syncAhead {
		return
	}
	if t.syncing != nil {
		select {
		case err := <-t.syncing:
			t.synced(err)
		default:
			return
		}
	}
	done := make(chan error, 1)
	t.syncing = done
	go func() { done <- t.s.db.Sync() }()
}

// waitSync waits for the background sync syncBehind started, and returns
// the first error one had: after a failed fdatasync the kernel may mark
// the pages it could not write clean, so a later sync succeeding would not
// mean the file is on disk. The file must not be closed before it returns.
func (t *txSpan) waitSync() error {
	if t.syncing != nil {
		t.synced(<-t.syncing)
	}
	return t.syncErr
}

// synced takes the result of the background sync: the first error stays.
func (t *txSpan) synced(err error) {
	t.syncing = nil
	if err != nil && t.syncErr == nil {
		t.syncErr = err
	}
}

// flush makes the writes to the feed that the open transaction has
// collected so far (indexWrites.writeAppended).
// The pipeline calls it when the applier would otherwise wait for the
// reader: the checkpoint's writes were most of a span's commit (~170 ms of
// ~270 ms per 50,000 events), and those of the rebuild's last span, made
// after the read had ended, a quarter of its wall time with one core
// working. The file holds the same keys and values.
//
// Not in a transaction that began on an empty file: each tree's keys (a
// partner's bucket's, in the partner indexes) all go into one node until
// the commit splits it, and each chunk's keys would be inserted among the
// previous chunks' (the feed's buckets of the partners, named by random
// ids, each made when its partner's first event comes), moving them.
func (t *txSpan) flush() (more bool, err error) {
	if t.tx == nil || t.first == 0 {
		return false, nil
	}
	if err := t.indexes.writeAppended(t.tx); err != nil {
		return false, errors.Join(fmt.Errorf("projections: indexes up to %d: %w", t.last, err), t.end(false))
	}
	return false, nil
}

// applyBatch applies records past the checkpoint and moves the checkpoint.
// It returns the new checkpoint, or 0 if nothing was new.
func applyBatch(tx *bolt.Tx, recs []eventlog.Record, evs []domain.Event) (uint64, error) {
	indexes, counts := newIndexWrites(len(recs)), newCounters(tx, len(recs))
	last, err := applyRecords(tx, readApplied(tx), recs, evs, indexes, counts)
	if err != nil || last == 0 {
		return 0, err
	}
	return last, checkpoint(tx, indexes, counts, last)
}

// applyFact runs the appliers and adders of one fact rec records.
func applyFact(tx *bolt.Tx, rec eventlog.Record, ev domain.Event, counts *counters) error {
	for _, a := range appliers[ev.Type] {
		if err := a(tx, rec, ev); err != nil {
			return fmt.Errorf("projections: apply %d (%s): %w", rec.Seq, ev.Type, err)
		}
	}
	for _, add := range adders[ev.Type] {
		add(counts, ev)
	}
	return nil
}

// applyRecords runs the appliers of the records past sequence applied and
// collects their index writes in indexes and their additions in counts. It
// returns the last sequence applied, or 0 if nothing was new.
func applyRecords(tx *bolt.Tx, applied uint64, recs []eventlog.Record, evs []domain.Event, indexes *indexWrites, counts *counters) (uint64, error) {
	var last uint64
	for i, rec := range recs {
		if rec.Seq <= applied {
			continue
		}
		if rec.Seq != applied+1 && applied != 0 {
			// Sequences are contiguous in a stream that denies deletes;
			// a gap means a consumer bug, and applying past it would
			// silently lose an event.
			return 0, fmt.Errorf("projections: gap in ledger: at %d, got %d", applied, rec.Seq)
		}
		indexes.indexRecord(rec, evs[i])
		if inner, ok := evs[i].InternalFact(); ok {
			if err := applyFact(tx, rec, inner, counts); err != nil {
				return 0, err
			}
		}
		if err := applyFact(tx, rec, evs[i], counts); err != nil {
			return 0, err
		}
		applied, last = rec.Seq, rec.Seq
	}
	return last, nil
}

// checkpoint makes the collected index writes and counters and moves the
// checkpoint to last.
func checkpoint(tx *bolt.Tx, indexes *indexWrites, counts *counters, last uint64) error {
	if err := counts.write(); err != nil {
		return fmt.Errorf("projections: counters up to %d: %w", last, err)
	}
	if err := indexes.write(tx); err != nil {
		return fmt.Errorf("projections: indexes up to %d: %w", last, err)
	}
	return tx.Bucket(bucketMeta).Put(keyApplied, u64(last))
}

// decodeAll decodes a batch's events before its transaction opens, on every
// core when the batch is large (a catch-up or a rebuild): decoding is the
// larger part of applying, and it needs no order.
func decodeAll(recs []eventlog.Record) ([]domain.Event, error) {
	evs := make([]domain.Event, len(recs))
	errs := make([]error, len(recs))
	decode := func(from, to int) {
		for i := from; i < to; i++ {
			evs[i], errs[i] = decodeForApply(recs[i])
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if len(recs) < parallelDecodeAt || workers == 1 {
		decode(0, len(recs))
	} else {
		var wg sync.WaitGroup
		chunk := (len(recs) + workers - 1) / workers
		for from := 0; from < len(recs); from += chunk {
			wg.Go(func() { decode(from, min(from+chunk, len(recs))) })
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("projections: apply %d (%s): %w", recs[i].Seq, recs[i].Type, err)
		}
	}
	return evs, nil
}

// decodeForApply decodes what applying rec takes. A record carrying an
// internal fact is applied from its envelope's header and that fact: the
// read models reacting to such a type read the fact, never the public
// payload (deposit.received: the deposit state and the balances come from
// the credit it carries), so that payload, the larger part of the bytes, is
// not decoded. Most of a ledger is such records, and decoding is most of
// what replaying one costs. Any other record is decoded whole.
func decodeForApply(rec eventlog.Record) (domain.Event, error) {
	if rec.Internal == nil {
		return rec.Event()
	}
	ev, err := domain.DecodeStoredHeader(rec.Partner, rec.Aggregate, rec.Type, rec.Public, rec.Data)
	if err == nil {
		err = domain.DecodeInternal(&ev, rec.Internal)
	}
	if err != nil {
		return domain.Event{}, fmt.Errorf("record %d: %w", rec.Seq, err)
	}
	return ev, nil
}

// parallelDecodeAt is the batch size from which decodeAll uses every core;
// below it, starting goroutines costs more than it saves.
const parallelDecodeAt = 256

// applier updates one read model for one event type.
type applier func(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error

var (
	appliers = map[string][]applier{}
	buckets  [][]byte
)

// on registers a read model's reaction to an event type.
func on(eventType string, a applier) {
	if _, ok := domain.EventTypeSpec(eventType); !ok {
		panic("projections: unknown event type " + eventType)
	}
	appliers[eventType] = append(appliers[eventType], a)
}

// bucket declares a bucket the read models use.
func bucket(name string) []byte {
	b := []byte(name)
	buckets = append(buckets, b)
	return b
}

func allBuckets() [][]byte { return append([][]byte{bucketMeta}, buckets...) }

// Outdated reports whether the file was written with an older layout than
// this build's, and must be rebuilt from the ledger before it serves.
func (s *Store) Outdated() (bool, error) {
	var schema uint64
	err := s.view(func(tx *bolt.Tx) error {
		schema = readSchema(tx)
		return nil
	})
	return schema < Schema, err
}

func readSchema(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keySchema)
	if len(v) != 8 {
		return 1
	}
	return binary.BigEndian.Uint64(v)
}

func readApplied(tx *bolt.Tx) uint64 {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0
	}
	v := b.Get(keyApplied)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	return true, json.Unmarshal(data, v)
}

// page walks an order index, whose keys are prefix followed by a position,
// from just after position after (from the start when nil). load decodes an
// entry's value and may report false to skip it (a filter). page stops after
// limit items (no limit when 0) and returns them with the position of the
// last one taken and whether more follow.
func page[T any](c *bolt.Cursor, prefix, after []byte, limit int, load func(v []byte) (T, bool, error)) ([]T, []byte, bool, error) {
	k, v := c.Seek(prefix)
	if after != nil {
		start := append(bytes.Clone(prefix), after...)
		if k, v = c.Seek(start); bytes.Equal(k, start) {
			k, v = c.Next()
		}
	}
	var (
		out  []T
		last []byte
	)
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		item, keep, err := load(v)
		if err != nil {
			return nil, nil, false, err
		}
		if !keep {
			continue
		}
		if limit > 0 && len(out) == limit {
			return out, last, true, nil
		}
		out = append(out, item)
		last = bytes.Clone(k[len(prefix):])
	}
	return out, last, false, nil
}

// Dump returns every bucket's contents, for comparing two files (and
// searching them): a nested bucket's entries under "<its name>/<key>" in
// the map of the top-level bucket holding it. The deposits are dumped as
// they read (depositGet), whether or not runs hold some of them.
func (s *Store) Dump() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			switch {
			case bytes.Equal(name, bucketDepositRuns):
				return nil // in the deposits' map
			case bytes.Equal(name, bucketDeposits):
				return dumpDeposits(tx, out)
			}
			m := map[string]string{}
			out[string(name)] = m
			if bytes.Equal(name, bucketPublicEvents) {
				return dumpBlocks(b, "", m)
			}
			return dumpBucket(b, "", m)
		})
	})
	return out, err
}

// dumpDeposits dumps the deposits as they read: the runs' from the oldest
// to the newest, then the table's, each replacing the value of a key an
// older one dumped.
func dumpDeposits(tx *bolt.Tx, out map[string]map[string]string) error {
	m := map[string]string{}
	out[string(bucketDeposits)] = m
	if runs := tx.Bucket(bucketDepositRuns); runs != nil {
		if err := runs.ForEachBucket(func(k []byte) error { return dumpBlocks(runs.Bucket(k), "", m) }); err != nil {
			return err
		}
	}
	return dumpBlocks(tx.Bucket(bucketDeposits), "", m)
}

func dumpBucket(b *bolt.Bucket, prefix string, into map[string]string) error {
	return walkBucket(b, prefix, func(prefix string, k, v []byte) { into[prefix+string(k)] = string(v) })
}

// walkBucket calls leaf for each key of b that is not a nested bucket, and
// of the buckets nested in it, with the prefix of the buckets it is in
// ("<name>/" each, after prefix).
func walkBucket(b *bolt.Bucket, prefix string, leaf func(prefix string, k, v []byte)) error {
	return b.ForEach(func(k, v []byte) error {
		if nested := b.Bucket(k); v == nil && nested != nil {
			return walkBucket(nested, prefix+string(k)+"/", leaf)
		}
		leaf(prefix, k, v)
		return nil
	})
}

// swap replaces the open file with the one at newPath, atomically for
// readers: they either see the old file or the new one.
//
// The old file is held open across the rename and closed after, in the
// background: the kernel drops a file's cached pages when its last link
// and its last descriptor go, and a rename over a file nothing holds does
// it inside the rename, under the lock readers wait on. For a 945 MB file
// just written that was 36-235 ms; with a descriptor held, the rename took
// 0.2-0.3 ms and the close the rest.
func (s *Store) swap(newPath string) error {
	if old, err := os.Open(s.path); err == nil {
		defer func() { go old.Close() }()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("swap projections: close: %w", err)
	}
	if err := os.Rename(newPath, s.path); err != nil {
		// Reopen the old file so the service keeps running.
		db, openErr := openBolt(s.path, s.opts)
		if openErr == nil {
			s.db, db.NoSync = db, s.unsynced
		}
		return errors.Join(fmt.Errorf("swap projections: %w", err), openErr)
	}
	db, err := openBolt(s.path, s.opts)
	if err != nil {
		return err
	}
	s.db, db.NoSync = db, s.unsynced
	var applied uint64
	_ = db.View(func(tx *bolt.Tx) error {
		applied = readApplied(tx)
		s.runsLeft.Store(hasRuns(tx))
		return nil
	})
	s.progressMu.Lock()
	s.applied = applied
	close(s.changed)
	s.changed = make(chan struct{})
	s.progressMu.Unlock()
	return nil
}
