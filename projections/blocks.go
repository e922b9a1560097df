package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// A bucket of blocks keeps its entries (key → value) many to a bbolt key:
// in key order, in blocks of at most a few of them, each block under its
// first entry's key, its value the entries one after another
// (appendEntry). bbolt's cost follows its keys, not their bytes: a put
// seeks from the root and moves the keys after it in its node, a commit
// spills and writes node by node, so a build that writes a million small
// values spends most of it on keys (measured with giving bench).
// The public events by id (eventBlock) and the deposits by trace
// (depositBlock) are kept so.

// appendEntry appends an entry of a block to b: the key's length
// (uvarint), the key, the value's length (uvarint), the value.
func appendEntry(b, k, v []byte) []byte {
	b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// entrySize is how many bytes appendEntry appends for k and v.
func entrySize(k, v []byte) int {
	return uvarintSize(len(k)) + len(k) + uvarintSize(len(v)) + len(v)
}

func uvarintSize(n int) int {
	size := 1
	for ; n >= 0x80; n >>= 7 {
		size++
	}
	return size
}

// nextEntry reads the entry at the start of block: its key and value, and
// the rest of block; ok is false at the end of block or on bytes that are
// not an entry.
func nextEntry(block []byte) (k, v, rest []byte, ok bool) {
	k, rest, ok = lengthPrefixed(block)
	if !ok {
		return nil, nil, nil, false
	}
	v, rest, ok = lengthPrefixed(rest)
	return k, v, rest, ok
}

func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// blockGet returns key's value in the bucket of blocks c walks, nil when it
// holds none. The value is the file's, valid for the transaction. A block
// that ends in bytes that are not an entry before key is found is an error,
// not an absent key: a deposit's record read as missing would let its
// trace be credited again.
func blockGet(c *bolt.Cursor, key []byte) ([]byte, error) {
	first, rest := atOrBefore(c, key)
	for {
		k, v, next, ok := nextEntry(rest)
		if !ok {
			break
		}
		switch bytes.Compare(k, key) {
		case 0:
			return v, nil
		case 1:
			return nil, nil
		}
		rest = next
	}
	if len(rest) > 0 {
		return nil, notEntries(first, rest)
	}
	return nil, nil
}

// notEntries is the error of a block under key that ends in rest, bytes
// that are not an entry.
func notEntries(key, rest []byte) error {
	return fmt.Errorf("projections: the block under %q ends in %d bytes that are not an entry", key, len(rest))
}

// mergeEntries returns the entries of block (at most size) and kvs (in key
// order) in key order; of equal keys, the one that came last (kvs after
// block) is kept, or block's when kvs are older. A block that ends in bytes
// that are not an entry is not written again without them: rest holds them
// (empty when there are none).
func mergeEntries(block []byte, size int, kvs []keyValue, kvsOlder bool) (out []keyValue, rest []byte) {
	out = make([]keyValue, 0, len(kvs)+size)
	add := func(k, v []byte, older bool) {
		if n := len(out); n > 0 && bytes.Equal(out[n-1].k, k) {
			if !older {
				out[n-1].v = v
			}
			return
		}
		out = append(out, keyValue{k: k, v: v})
	}
	rest = block
	k, v, next, ok := nextEntry(rest)
	for _, kv := range kvs {
		for ; ok && bytes.Compare(k, kv.k) <= 0; k, v, next, ok = nextEntry(rest) {
			add(k, v, false)
			rest = next
		}
		add(kv.k, kv.v, kvsOlder)
	}
	for ; ok; k, v, next, ok = nextEntry(rest) {
		add(k, v, false)
		rest = next
	}
	return out, rest
}

// blockSizes splits n entries into blocks of at most size: from the start
// in full blocks when they end the bucket's keys (the next keys, when they
// come in order, go after them), evenly otherwise (a block in the middle
// that keys out of order grew: full blocks would leave a small one behind
// it at every straggler). It returns each block's length.
func blockSizes(n, size int, last bool) []int {
	blocks := (n + size - 1) / size
	sizes := make([]int, blocks)
	for i := range sizes {
		if last {
			sizes[i] = min(size, n-i*size)
			continue
		}
		sizes[i] = n / blocks
		if i < n%blocks {
			sizes[i]++
		}
	}
	return sizes
}

// putInBlocks adds kvs (in key order, one of each key) to the bucket of
// blocks b, in blocks of at most size: the keys up to the next block's
// first go into the last block that starts at or before the first of them
// (the first block, when they come before every one), which is written
// again with them. Of a key b holds already, kvs's value replaces b's,
// unless kvs are older (b's stays). The blocks are carved from mem, which
// must hold them until the transaction commits (bbolt keeps what a put is
// given).
func putInBlocks(b *bolt.Bucket, kvs []keyValue, size int, mem *arena, kvsOlder bool) error {
	for len(kvs) > 0 {
		// A cursor is placed afresh once its bucket has changed.
		c := b.Cursor()
		k, v := atOrBefore(c, kvs[0].k)
		if k == nil {
			k, v = c.First()
		}
		n, last := len(kvs), true
		if k != nil {
			if next, _ := c.Next(); next != nil {
				n, _ = slices.BinarySearchFunc(kvs, next, func(kv keyValue, key []byte) int { return bytes.Compare(kv.k, key) })
				last = false
			}
		}
		if n == 0 {
			return fmt.Errorf("projections: key %q found no block before %q", kvs[0].k, k)
		}
		entries, rest := mergeEntries(v, size, kvs[:n], kvsOlder)
		if len(rest) > 0 {
			return notEntries(k, rest)
		}
		if k != nil && !bytes.Equal(k, entries[0].k) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		for _, size := range blockSizes(len(entries), size, last) {
			need := 0
			for _, e := range entries[:size] {
				need += entrySize(e.k, e.v)
			}
			block := mem.carve(need)
			for _, e := range entries[:size] {
				block = appendEntry(block, e.k, e.v)
			}
			if err := b.Put(entries[0].k, block); err != nil {
				return err
			}
			entries = entries[size:]
		}
		kvs = kvs[n:]
	}
	return nil
}

// dumpBlocks dumps a bucket of blocks (in buckets of their own under it,
// as a partner index keeps them, or not) entry by entry, as
// "<bucket>/<key>" → its value, not by block: where blocks split depends
// on the transactions that wrote them (a key that comes out of order grows
// the block it falls in), what they hold does not. A block with bytes that
// are not entries is dumped as it is, under its own key.
func dumpBlocks(b *bolt.Bucket, prefix string, into map[string]string) error {
	return walkBucket(b, prefix, func(prefix string, k, block []byte) {
		rest := block
		for {
			ek, ev, next, ok := nextEntry(rest)
			if !ok {
				break
			}
			into[prefix+string(ek)] = string(ev)
			rest = next
		}
		if len(rest) > 0 || len(block) == 0 {
			into[prefix+string(k)] = string(block)
		}
	})
}
