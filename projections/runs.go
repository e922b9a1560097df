package projections

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A file build (catchUpFile) does not insert deposits into their table span
// by span. A deposit's key is its trace, which follows no order of the
// ledger's, so each span's deposits land all over the table: at a million
// events every span of 50,000 rewrote most of its leaves (tens of thousands
// of pages, half empty from splits in the middle), and the table's pages
// were about a third of what a rebuild wrote, growing with the history
// rather than with the span. Instead each span
// writes its deposits, sorted, as a run of their own (in blocks, see
// blocks.go, appended to an empty bucket, so pages are written once and
// full), and the runs are merged into the table in key order later:
// appended again, once.
// With traces that come in about the ledger's order (giving bench's) this
// gains nothing; with traces in no order of the ledger's (the sandbox
// bank's, or many banks'), a build at a million deposits took 7.5-7.9 s
// instead of 10.8-12.1 (BenchmarkRebuildMillionScattered).
//
// The merge is not part of the build. It ran after the last span, on one
// core with nothing else to do, 1.05-1.18 s of a 7.7-17.9 s rebuild of a
// million events, and the rebuilt file served
// only after it. The file is complete without it: a deposit is read from
// the table, else from the newest run that has it (depositGet). The table
// holds only what was written after the runs (a file is built into an
// empty table, and the merge keeps the table's value of a key in both), so
// it is the newest. The follow loop merges the runs into the table when it
// has nothing to apply (mergeRunsStep, a few thousand deposits a
// transaction, between the batches it applies), and drops them once merged.

// bucketDepositRuns holds, until they are merged, a bucket per span (its
// number, big-endian) of the span's deposits, as the deposits table would
// hold them. It is created by a build's first span and deleted by the last
// step of the merge.
var bucketDepositRuns = []byte("deposit_runs")

// writeRun writes a span's deposits, sorted and one of each key, as the
// next run, in blocks carved from mem.
func writeRun(tx *bolt.Tx, kvs []keyValue, mem *arena) error {
	runs, err := tx.CreateBucketIfNotExists(bucketDepositRuns)
	if err != nil {
		return err
	}
	var n uint64
	if k, _ := runs.Cursor().Last(); len(k) == 8 {
		n = binary.BigEndian.Uint64(k)
	}
	run, err := runs.CreateBucket(binary.BigEndian.AppendUint64(nil, n+1))
	if err != nil {
		return err
	}
	run.FillPercent = 1 // keys come in order: pages fill, none splits in the middle
	return putInBlocks(run, kvs, depositBlock, mem, false)
}

// depositGet returns key's value in the deposits table, else in the newest
// run that has it (nil when none does).
func depositGet(tx *bolt.Tx, key []byte) ([]byte, error) {
	if v, err := blockGet(tx.Bucket(bucketDeposits).Cursor(), key); v != nil || err != nil {
		return v, err
	}
	runs := tx.Bucket(bucketDepositRuns)
	if runs == nil {
		return nil, nil
	}
	c := runs.Cursor()
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		if v, err := blockGet(runs.Bucket(k).Cursor(), key); v != nil || err != nil {
			return v, err
		}
	}
	return nil, nil
}

// hasRuns reports whether the file holds runs not yet merged.
func hasRuns(tx *bolt.Tx) bool { return tx.Bucket(bucketDepositRuns) != nil }

// RunsLeft reports whether the file still holds deposits a build wrote as
// runs, which the follow loop merges into their table when it has nothing
// to apply (see runs.go). The file reads the same either way.
func (s *Store) RunsLeft() bool { return s.runsLeft.Load() }

// mergeEvery is how many deposits a transaction of the merge puts: the
// follow loop applies nothing meanwhile (about 5 ms at 4,096 on this
// machine), and what the transaction changed stays in memory until it
// commits.
const mergeEvery = 4096

// mergeRunsStep merges up to every of the runs' deposits past after (from
// the first when nil) into the deposits table, in key order (of a key in
// several runs, the newest run's value; of a key the table holds, the
// table's), and deletes the runs once none is left. It returns the last key
// it put, and whether the runs are gone. A file without runs is left as it
// is. Merging again what was merged already changes nothing (the table's
// value stays), so a merge cut short starts again from the first key.
func mergeRunsStep(tx *bolt.Tx, after []byte, every int, buf *mergeBuffer) ([]byte, bool, error) {
	runs := tx.Bucket(bucketDepositRuns)
	if runs == nil {
		return nil, true, nil
	}
	after, done, err := mergeSome(tx, runs, after, every, buf)
	if err == nil && done {
		err = tx.DeleteBucket(bucketDepositRuns)
	}
	if err != nil {
		return nil, false, fmt.Errorf("projections: merge the deposits: %w", err)
	}
	return after, done, nil
}

// runsMerger returns a merge of the runs a build left in the file, a step
// at a time, each in a transaction of its own: each call reports whether
// runs remain. It does nothing once they are gone, nor after a step
// failed (it returns that error once): the runs then stay, and deposits are
// read from them as before. A merger made afresh (the follow loop's, when
// it starts again after an error or a swap by Rebuild) merges from the
// first key again.
func (s *Store) runsMerger() func() (more bool, err error) {
	var (
		db     *bolt.DB
		after  []byte
		buf    = &mergeBuffer{mem: arena{block: 1 << 20}}
		failed bool
	)
	return func() (bool, error) {
		if failed || !s.runsLeft.Load() {
			return false, nil
		}
		done := false
		s.mu.RLock()
		defer s.mu.RUnlock()
		if db != s.db {
			db, after = s.db, nil
		}
		err := db.Update(func(tx *bolt.Tx) error {
			var err error
			after, done, err = mergeRunsStep(tx, after, mergeEvery, buf)
			return err
		})
		if err != nil {
			failed = true
			return false, err
		}
		if done {
			s.runsLeft.Store(false)
		}
		return !done, nil
	}
}

// MergeRuns merges the runs a build left in the file into the deposits
// table, all of them (giving replay, rebuilding a stopped instance's file,
// leaves none for the next start).
func (s *Store) MergeRuns() error {
	merge := s.runsMerger()
	for {
		if more, err := merge(); err != nil || !more {
			return err
		}
	}
}

// mergeBuffer is what a transaction of the merge collects its entries in
// and carves their blocks from.
type mergeBuffer struct {
	kvs []keyValue
	mem arena
}

// mergeSome puts up to every deposits past after from the runs into the
// deposits table, and returns the last key put and whether the runs are
// exhausted. It empties buf first.
func mergeSome(tx *bolt.Tx, runs *bolt.Bucket, after []byte, every int, buf *mergeBuffer) ([]byte, bool, error) {
	var h runHeap
	rc := runs.Cursor()
	for n, _ := rc.First(); n != nil; n, _ = rc.Next() {
		r := &runCursor{c: runs.Bucket(n).Cursor(), n: binary.BigEndian.Uint64(n)}
		if r.seekAfter(after) {
			h = append(h, r)
		} else if r.err != nil {
			return nil, false, r.err
		}
	}
	heap.Init(&h)
	// The keys and values are the file's (bbolt copies them out of the
	// mapping before it ever remaps it), valid for the transaction; the
	// blocks are carved from buf.mem, which bbolt holds until the commit.
	buf.mem.reset()
	kvs := buf.kvs[:0]
	defer func() { buf.kvs = kvs }()
	for len(kvs) < every && len(h) > 0 {
		// The heap's top is the smallest key, of the newest run among
		// those holding it: its value is the one to keep.
		top := h[0]
		kvs = append(kvs, keyValue{k: top.k, v: top.v})
		last := top.k
		for len(h) > 0 && bytes.Equal(h[0].k, last) {
			if !h[0].next() {
				if r := heap.Pop(&h).(*runCursor); r.err != nil {
					return nil, false, r.err
				}
			} else {
				heap.Fix(&h, 0)
			}
		}
	}
	if len(kvs) == 0 {
		return after, true, nil
	}
	table := tx.Bucket(bucketDeposits)
	table.FillPercent = 1
	if err := putInBlocks(table, kvs, depositBlock, &buf.mem, true); err != nil {
		return nil, false, err
	}
	return bytes.Clone(kvs[len(kvs)-1].k), len(h) == 0, nil
}

// runCursor is a run's place in the merge: its entry k, v, in the block
// whose rest is block, of the blocks c walks.
type runCursor struct {
	c     *bolt.Cursor
	n     uint64
	block []byte
	k, v  []byte
	// err is set when a block of the run holds bytes that are not
	// entries (the run ends there).
	err error
}

// seekAfter places r at the run's first entry after after (its first when
// after is nil), and reports whether there is one.
func (r *runCursor) seekAfter(after []byte) bool {
	var block []byte
	if after == nil {
		_, block = r.c.First()
	} else if _, block = atOrBefore(r.c, after); block == nil {
		_, block = r.c.First()
	}
	r.block = block
	if block == nil {
		return false
	}
	for r.next() {
		if after == nil || bytes.Compare(r.k, after) > 0 {
			return true
		}
	}
	return false
}

// next moves r to the run's next entry, and reports whether there is one.
func (r *runCursor) next() bool {
	for {
		k, v, rest, ok := nextEntry(r.block)
		if ok {
			r.k, r.v, r.block = k, v, rest
			return true
		}
		if len(r.block) > 0 {
			r.err = fmt.Errorf("projections: run %d: a block of deposits ends in %d bytes that are not an entry", r.n, len(r.block))
			return false
		}
		if _, r.block = r.c.Next(); r.block == nil {
			return false
		}
	}
}

// runHeap orders the runs' cursors by key, then newest run first.
type runHeap []*runCursor

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].k, h[j].k); c != 0 {
		return c < 0
	}
	return h[i].n > h[j].n
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runCursor)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
