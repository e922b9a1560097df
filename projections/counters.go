package projections

import (
	"bytes"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
)

// counters is a transaction's write-back cache of the values some events
// add to or set (a church's balance, an account's total, a deposit's
// state): each is read from the file at its first get in the transaction,
// kept in memory, and written once, with the transaction's checkpoint, each
// bucket's in key order. A rebuild's transaction adds tens of thousands of
// deposits to a thousand churches' counters; read and written at each
// deposit, they were a third of the applier's time. Only the appliers that
// add to them read them in a transaction, and they do through the cache.
//
// It keeps a bucket's puts in the order they came, with their keys and
// values copied into blocks of its own, and an index of them by key only
// once something gets from that bucket: a rebuild's deposits are set once
// each and never read back in the transaction, and keeping them in a map
// (a key string, a value and a map entry each, grown to tens of thousands,
// then its keys sorted) took more of the applier than bbolt's puts of them.
type counters struct {
	tx *bolt.Tx
	// runs: a file build's deposits go to runs (see runs.go).
	runs    bool
	pending []*pendingPuts
	mem     arena
	// err is the first error a get met (a block of deposits that ends in
	// bytes that are not an entry); write returns it, so the transaction
	// fails rather than decide from a record it could not read.
	err error
	// keyBuf and valBuf are the adders' scratch (see key and scratch):
	// what they build a key or a value in before get or put copies it.
	keyBuf, valBuf []byte
}

// pendingPuts is one bucket's puts in the transaction.
type pendingPuts struct {
	bucket []byte
	// kvs are the puts in the order they came; one key is put once while
	// the bucket has an index, and may be put again before.
	kvs []keyValue
	// index finds a key's put in kvs; nil until the bucket's first get.
	index map[string]int
}

// counterBlock is the largest block the counters' keys and values are
// carved from; counterBlockPerRecord sizes a small batch's.
const (
	counterBlock          = 64 << 10
	counterBlockPerRecord = 256
)

func newCounters(tx *bolt.Tx, records int) *counters {
	return &counters{tx: tx, mem: arena{block: min(counterBlock, counterBlockPerRecord*max(records, 1))}}
}

// reset empties c, keeping what it allocated (see txSpan.recycle): nothing
// c handed out before may be used after, and the next transaction sets tx.
func (c *counters) reset() {
	c.tx, c.err = nil, nil
	for _, p := range c.pending {
		p.kvs, p.index = p.kvs[:0], nil
	}
	c.mem.reset()
}

// counting registers an event type's additions to counters.
func counting(eventType string, add func(c *counters, ev domain.Event)) {
	if _, ok := domain.EventTypeSpec(eventType); !ok {
		panic("projections: unknown event type " + eventType)
	}
	adders[eventType] = append(adders[eventType], add)
}

var adders = map[string][]func(c *counters, ev domain.Event){}

// key returns parts joined in the scratch key, which the next call reuses.
// The scratch has room past the key for what an adder appends to it (an
// account's key after its church's, accountKey) without allocating.
func (c *counters) key(parts ...string) []byte {
	if c.keyBuf == nil {
		c.keyBuf = make([]byte, 0, scratchValue)
	}
	c.keyBuf = c.keyBuf[:0]
	for _, p := range parts {
		c.keyBuf = append(c.keyBuf, p...)
	}
	return c.keyBuf
}

// scratch returns the scratch value, empty, for a value to be built in and
// put. It has room for any value the adders build (a deposit's state is
// at most 777 bytes), so appending to it never allocates.
func (c *counters) scratch() []byte {
	if c.valBuf == nil {
		c.valBuf = make([]byte, 0, scratchValue)
	}
	return c.valBuf[:0]
}

// scratchValue is the room of the scratch value.
const scratchValue = 1024

// get returns the value of key in bucket: as put in the transaction, else
// as the file holds it (nil when it has none). It is read-only, and valid
// until the next put.
func (c *counters) get(bucket, key []byte) []byte {
	p := c.of(bucket)
	if p.index == nil {
		p.index = make(map[string]int, len(p.kvs))
		for i, kv := range p.kvs {
			p.index[string(kv.k)] = i // a later put of a key wins
		}
	}
	if i, ok := p.index[string(key)]; ok {
		return p.kvs[i].v
	}
	if bytes.Equal(bucket, bucketDeposits) {
		v, err := depositGet(c.tx, key)
		if err != nil && c.err == nil {
			c.err = err
		}
		return v
	}
	return c.tx.Bucket(bucket).Get(key)
}

// put sets key's value in bucket, to be written with the checkpoint. It
// copies key and v.
func (c *counters) put(bucket, key, v []byte) {
	p := c.of(bucket)
	if p.index != nil {
		if i, ok := p.index[string(key)]; ok {
			if len(p.kvs[i].v) == len(v) {
				copy(p.kvs[i].v, v) // not yet given to bbolt
			} else {
				p.kvs[i].v = c.mem.copy(v)
			}
			return
		}
		p.index[string(key)] = len(p.kvs)
	}
	p.kvs = append(p.kvs, keyValue{k: c.mem.copy(key), v: c.mem.copy(v)})
}

// of returns the bucket's puts (a transaction puts into a few buckets).
func (c *counters) of(bucket []byte) *pendingPuts {
	for _, p := range c.pending {
		if bytes.Equal(p.bucket, bucket) {
			return p
		}
	}
	p := &pendingPuts{bucket: bucket}
	c.pending = append(c.pending, p)
	return p
}

// write writes the values put, each bucket's in key order; of two puts of
// one key, the later is written.
func (c *counters) write() error {
	if c.err != nil {
		return c.err
	}
	byKey := func(a, b keyValue) int { return bytes.Compare(a.k, b.k) }
	for _, p := range c.pending {
		kvs := p.kvs
		if !slices.IsSortedFunc(kvs, byKey) {
			kvs = sortByPartner(kvs)
		}
		// Keep the last put of each key (the sort is stable).
		last := kvs[:0]
		for i, kv := range kvs {
			if i+1 < len(kvs) && bytes.Equal(kv.k, kvs[i+1].k) {
				continue
			}
			last = append(last, kv)
		}
		b := c.tx.Bucket(p.bucket)
		if bytes.Equal(p.bucket, bucketDeposits) {
			var err error
			if c.runs {
				err = writeRun(c.tx, last, &c.mem)
			} else {
				err = putInBlocks(b, last, depositBlock, &c.mem, false)
			}
			if err != nil {
				return err
			}
			continue
		}
		for _, kv := range last {
			if err := b.Put(kv.k, kv.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// sortByPartner returns kvs in key order, of equal keys in the order they
// came. Every counter's key begins with its partner ("<partner>/..."), and
// a rebuild's transaction puts a partner's few dozen deposits in the order
// of their traces, most often already theirs: kvs are grouped by partner
// (sortByGroup) rather than sorted as one, which compared each key with a
// dozen others and was 2.6% of a build's CPU.
func sortByPartner(kvs []keyValue) []keyValue {
	groups := map[string]int32{}
	var partners []string
	for i, kv := range kvs {
		// With its slash, no partner's prefix begins another's: the
		// prefixes' order is their keys'.
		prefix := kv.k
		if slash := bytes.IndexByte(prefix, '/'); slash >= 0 {
			prefix = prefix[:slash+1]
		}
		g, ok := groups[string(prefix)]
		if !ok {
			g = int32(len(partners))
			partners = append(partners, string(prefix))
			groups[partners[g]] = g
		}
		kvs[i].group = g
	}
	return sortByGroup(kvs, rankNames(partners))
}

// arena hands out byte slices carved from large blocks rather than
// allocated one by one: bbolt keeps what a put is given until the
// transaction commits, and so does the arena. An arena that is reset
// carves its blocks again (see txSpan.recycle).
type arena struct {
	buf []byte
	// block is the size of a block (a larger slice gets a block of its own).
	block int
	// blocks are the blocks made so far; used, how many of them have been
	// carved from since the last reset.
	blocks [][]byte
	used   int
}

// carve returns an empty slice with room for n bytes, its capacity ending
// there so that appending to it never reaches the next one.
func (a *arena) carve(n int) []byte {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = a.nextBlock(n)
	}
	start := len(a.buf)
	a.buf = a.buf[:start+n]
	return a.buf[start : start : start+n]
}

// nextBlock returns an empty block with room for n bytes: the next one
// made before the last reset that has it, else a new one.
func (a *arena) nextBlock(n int) []byte {
	for a.used < len(a.blocks) {
		b := a.blocks[a.used]
		a.used++
		if cap(b) >= n {
			return b[:0]
		}
	}
	b := make([]byte, 0, max(a.block, n))
	a.blocks = append(a.blocks, b)
	a.used = len(a.blocks)
	return b
}

// reset makes the arena carve its blocks again, from the first. Nothing
// carved before may be used after: it is overwritten.
func (a *arena) reset() { a.buf, a.used = nil, 0 }

// copy returns a copy of b carved from the arena.
func (a *arena) copy(b []byte) []byte { return append(a.carve(len(b)), b...) }
