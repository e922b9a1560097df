package projections

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bucketPublicEvents holds a bucket per partner (see partnerIndex): the
// partner's public events by id, so one event can be fetched by its id
// (the ledger indexes subjects, not ids) at the cost of one lookup and one
// read. The ids are kept in blocks of up to eventBlock, in id order: a
// block's key is its first id, its value the entries (eventEntry). Written
// by indexWrites.putEventIDs.
var bucketPublicEvents = bucket("public_events")

// eventBlock is how many ids a block of a partner's public events holds.
// A key an event cost a rebuild about 2 µs of the process's CPU at a
// million events, whatever its value (BENCHMARKS.md, session 16), as the
// feed's types did before their blocks (typeBlock): in blocks, a rebuild's
// span makes a put for every sixteen of a partner's ids, since ids are made
// in order (domain.NewSortedID) and each span's land after the last
// block's first.
// A live commit rewrites the block its id falls in, about 650 bytes.
// Sixteen measured cheaper than 32 and than 8 (BENCHMARKS.md, session 18):
// smaller blocks pack pages better, larger ones make fewer puts.
const eventBlock = 16

// An entry of a block of public events: the id's length (uvarint), the
// id, and the event's stream sequence (8 bytes, big-endian).
func appendEventEntry(b, id []byte, seq uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(id)))
	return binary.BigEndian.AppendUint64(append(b, id...), seq)
}

// eventEntry reads the entry at the start of block: its id and sequence,
// and the rest of block; ok is false at the end of block or on bytes that
// are not an entry.
func eventEntry(block []byte) (id []byte, seq uint64, rest []byte, ok bool) {
	n, w := binary.Uvarint(block)
	if w <= 0 || uint64(len(block)-w) < n+8 {
		return nil, 0, nil, false
	}
	id, block = block[w:w+int(n)], block[w+int(n):]
	return id, binary.BigEndian.Uint64(block), block[8:], true
}

// PublicEventSeq returns where one of the partner's public events is in the
// ledger.
func (s *Store) PublicEventSeq(partner, eventID string) (uint64, bool, error) {
	var (
		seq uint64
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		events := partnerIndexOf(tx, bucketPublicEvents, partner)
		if events == nil {
			return nil
		}
		want := []byte(eventID)
		_, block := atOrBefore(events.Cursor(), want)
		for id, s, rest, more := eventEntry(block); more; id, s, rest, more = eventEntry(rest) {
			c := bytes.Compare(id, want)
			if c == 0 {
				seq, ok = s, true
			}
			if c >= 0 {
				break
			}
		}
		return nil
	})
	return seq, ok, err
}

// eventRef is an entry of a block of public events.
type eventRef struct {
	id  []byte
	seq uint64
}

// mergeEventIDs returns the entries of block and of kvs (ids → their
// sequences as 8 bytes, in id order) in id order; of equal ids, the one
// that came last (kvs after block) is kept.
func mergeEventIDs(block []byte, kvs []keyValue) []eventRef {
	out := make([]eventRef, 0, eventBlock+len(kvs))
	add := func(e eventRef) {
		if n := len(out); n > 0 && bytes.Equal(out[n-1].id, e.id) {
			out[n-1] = e
			return
		}
		out = append(out, e)
	}
	id, seq, rest, ok := eventEntry(block)
	for _, kv := range kvs {
		for ; ok && bytes.Compare(id, kv.k) <= 0; id, seq, rest, ok = eventEntry(rest) {
			add(eventRef{id, seq})
		}
		add(eventRef{kv.k, binary.BigEndian.Uint64(kv.v)})
	}
	for ; ok; id, seq, rest, ok = eventEntry(rest) {
		add(eventRef{id, seq})
	}
	return out
}

// eventBlocks splits n entries into blocks of at most eventBlock: from the
// start in full blocks when they end a partner's ids (the next ids, made
// later, go after them), evenly otherwise (a block in the middle that ids
// out of order grew: full blocks would leave a small one behind it at
// every straggler). It returns each block's length.
func eventBlocks(n int, last bool) []int {
	blocks := (n + eventBlock - 1) / eventBlock
	sizes := make([]int, blocks)
	for i := range sizes {
		if last {
			sizes[i] = min(eventBlock, n-i*eventBlock)
			continue
		}
		sizes[i] = n / blocks
		if i < n%blocks {
			sizes[i]++
		}
	}
	return sizes
}
