package projections

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/idempotency"
)

// The indexes every event may add to, which no applier reads: the msg-id
// index, the public events by id, the feed and its types. A batch's writes
// to them are collected and made at the end of its transaction, each
// index's in key order. bbolt splits pages only when a transaction commits,
// so keys put out of order into one page (say, a rebuild's first msg-ids,
// or a partner's feed types of two types) move the page's growing entry
// list on every put; in key order each put lands at the end of it.
// The file holds the same keys and values either way.
type index int

const (
	indexMsgIDs index = iota
	indexPublicEvents
	indexFeedEntries
	indexFeedTypes
	numIndexes
)

var indexBuckets = [numIndexes][]byte{
	indexMsgIDs:       bucketMsgIDs,
	indexPublicEvents: bucketPublicEvents,
	indexFeedEntries:  bucketFeed,
	indexFeedTypes:    bucketFeedTypes,
}

// The public events, the feed and its types hold a bucket per partner,
// named by the partner's id, and a partner's keys in it (writeIndex):
// what a put seeks through and a commit rewrites is that partner's tree,
// shallow and keyed by short keys, not one tree of every partner's entries
// keyed by a 32-byte partner prefix, whose depth and key comparisons grew
// with everyone's history. Measured on a file of a million events over
// 1,000 partners (BenchmarkRebuild): the three indexes' writes in
// a rebuild's transactions 3.7-4.3 µs an event against 8.9-9.5, and a
// one-event commit 15.2 pages against 18.2. The msg-ids are one tree.
func partnerIndex(i index) bool { return i != indexMsgIDs }

// indexFill is how full bbolt packs a page it splits, per index (in a
// partner index, each partner's bucket's). The feed and its types are
// keyed by sequence: each partner's keys are appended after its last.
// bbolt's default (half) leaves every page it splits half empty, and that
// half is never filled, since the next keys go after it: twice the pages
// to write, at each commit, for the same entries. The msg-ids are
// caller-chosen, so their keys land anywhere in the tree, and a full page
// would split at nearly every insert. The public events' blocks are keyed
// by their first ids, made in order (by earlier builds, random within
// their second): either way new blocks land near the end of a
// partner's keys, and a block an id out of order goes into grows, so a
// page split there is packed to nine tenths (half full, the default, the
// ids took 111 MB for 55 MB of keys at a million events, before their
// blocks; nine tenths cut a rebuild's CPU by about 1 µs an event).
var indexFill = [numIndexes]float64{
	indexMsgIDs:       bolt.DefaultFillPercent,
	indexPublicEvents: 0.9,
	indexFeedEntries:  1,
	indexFeedTypes:    1,
}

type keyValue struct {
	k, v []byte
	// group is the partner whose keys k is among (see indexWrites.group).
	group int32
}

// indexWrites is one transaction's writes to the indexes.
type indexWrites struct {
	puts [numIndexes][]keyValue
	// groups numbers the partners written, in the order they came: the
	// feed, its types and the public events keep a bucket per partner,
	// and write makes their writes partner by partner.
	groups  map[string]int32
	partner []string
	// mem holds the keys and sequences written.
	mem arena
	// n is the batch's length, the capacity a first put gives its index.
	n int
}

func newIndexWrites(n int) *indexWrites {
	return &indexWrites{n: n, mem: arena{block: min(indexBlock, indexBlockPerRecord*n)}}
}

// reset empties w, keeping what it allocated (see txSpan.recycle): nothing
// w handed out before may be used after. The puts' entries are cleared, so
// that the envelopes they held (the feed's values) can be collected.
func (w *indexWrites) reset() {
	for i := range w.puts {
		clear(w.puts[i][:cap(w.puts[i])])
		w.puts[i] = w.puts[i][:0]
	}
	clear(w.groups)
	clear(w.partner)
	w.partner = w.partner[:0]
	w.mem.reset()
}

// indexRecord adds what rec contributes to the indexes.
func (w *indexWrites) indexRecord(rec eventlog.Record, ev domain.Event) {
	if idempotency.IsRequestMsgID(rec.MsgID) {
		// Only the ids a retried request looks up (see bucketMsgIDs).
		w.put(indexMsgIDs, 0, w.key(rec.MsgID), w.seqKey(rec.Seq))
	}
	if !rec.Public {
		// A record of an internal type (or of a retired internal type
		// that a public type took the name of) is not a partner's.
		return
	}
	g := w.group(rec.Partner)
	w.put(indexPublicEvents, g, w.key(ev.ID), w.seqKey(rec.Seq))
	// The envelope goes in as stored: never decoded and encoded again, so
	// the feed carries the same bytes as a webhook.
	w.put(indexFeedEntries, g, w.seqKey(rec.Seq), rec.Data)
	w.put(indexFeedTypes, g, w.seqKey(rec.Seq, rec.Type, "/"), nil)
}

// group returns the partner's number among those written.
func (w *indexWrites) group(partner string) int32 {
	if g, ok := w.groups[partner]; ok {
		return g
	}
	if w.groups == nil {
		w.groups = map[string]int32{}
	}
	g := int32(len(w.partner))
	w.groups[partner] = g
	w.partner = append(w.partner, partner)
	return g
}

func (w *indexWrites) put(i index, group int32, k, v []byte) {
	if w.puts[i] == nil {
		w.puts[i] = make([]keyValue, 0, w.n)
	}
	w.puts[i] = append(w.puts[i], keyValue{k: k, v: v, group: group})
}

// key returns the concatenation of parts.
func (w *indexWrites) key(parts ...string) []byte { return w.join(0, parts) }

// seqKey returns the concatenation of parts followed by seq, big-endian
// (the layout of feed.go's seqKey, which the readers seek with).
func (w *indexWrites) seqKey(seq uint64, parts ...string) []byte {
	return binary.BigEndian.AppendUint64(w.join(8, parts), seq)
}

// join concatenates parts into a carved key with room for extra more bytes.
func (w *indexWrites) join(extra int, parts []string) []byte {
	n := extra
	for _, p := range parts {
		n += len(p)
	}
	k := w.mem.carve(n)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// indexBlock is the largest size of the blocks keys are carved from;
// indexBlockPerRecord sizes a small batch's blocks: a record's keys take a
// few hundred bytes. A write request's event is applied in a transaction of
// one or two records, a thousand times a second under load, and a 64 KiB
// block for each was most of what the projector allocated.
const (
	indexBlock          = 64 << 10
	indexBlockPerRecord = 512
)

// write makes the collected writes, each index's in key order; of two
// writes to one key, the later is made last and wins, as it would unsorted.
func (w *indexWrites) write(tx *bolt.Tx) error {
	rank := w.ranks()
	for i := range w.puts {
		if err := w.writeIndex(tx, index(i), rank); err != nil {
			return err
		}
	}
	return nil
}

// writeIndex makes the collected writes to one index, in key order (in a
// partner index, partner by partner, each into the partner's bucket).
func (w *indexWrites) writeIndex(tx *bolt.Tx, i index, rank []int32) error {
	b := tx.Bucket(indexBuckets[i])
	into, group := b, int32(-1)
	if !partnerIndex(i) {
		// (A partner index's own keys are the partners' ids, random: it
		// keeps bbolt's default.)
		b.FillPercent = indexFill[i]
	}
	sorted := sortByGroup(w.puts[i], rank)
	for n := 0; n < len(sorted); n++ {
		kv := sorted[n]
		if partnerIndex(i) && kv.group != group {
			var err error
			if into, err = b.CreateBucketIfNotExists([]byte(w.partner[kv.group])); err != nil {
				return err
			}
			into.FillPercent, group = indexFill[i], kv.group
		}
		if i == indexFeedTypes {
			// The partner's sequences of one type, in order, go into
			// its blocks together.
			prefix := kv.k[:len(kv.k)-8]
			end := n + 1
			for end < len(sorted) && sorted[end].group == group && len(sorted[end].k) == len(kv.k) && bytes.HasPrefix(sorted[end].k, prefix) {
				end++
			}
			seqs := w.mem.carve(8 * (end - n))
			for _, t := range sorted[n:end] {
				seqs = append(seqs, t.k[len(prefix):]...)
			}
			n = end - 1
			if err := w.appendTypeSeqs(into, prefix, seqs); err != nil {
				return err
			}
			continue
		}
		if i == indexPublicEvents {
			// The partner's ids, in order, go into its blocks together.
			end := n + 1
			for end < len(sorted) && sorted[end].group == group {
				end++
			}
			if err := putInBlocks(into, sorted[n:end], eventBlock, &w.mem, false); err != nil {
				return err
			}
			n = end - 1
			continue
		}
		if err := into.Put(kv.k, kv.v); err != nil {
			return err
		}
	}
	return nil
}

// appendTypeSeqs appends seqs (big-endian sequences, ascending, each past
// those already there) to the blocks of one type in a partner's bucket of
// the feed's types: the last block while it has room, then new ones.
func (w *indexWrites) appendTypeSeqs(b *bolt.Bucket, prefix, seqs []byte) error {
	k, v := atOrBefore(b.Cursor(), seqKey(prefix, math.MaxUint64))
	if k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 && len(v) < typeBlock*8 {
		take := min(typeBlock*8-len(v), len(seqs))
		grown := append(append(w.mem.carve(len(v)+take), v...), seqs[:take]...)
		if err := b.Put(k, grown); err != nil {
			return err
		}
		seqs = seqs[take:]
	}
	for len(seqs) > 0 {
		take := min(typeBlock*8, len(seqs))
		key := append(append(w.mem.carve(len(prefix)+8), prefix...), seqs[:8]...)
		if err := b.Put(key, seqs[:take:take]); err != nil {
			return err
		}
		seqs = seqs[take:]
	}
	return nil
}

// writeAppended makes the collected writes to the feed, and forgets them
// (see txSpan.flush). A partner's keys there come in key order, so writing
// them in chunks inserts each chunk after the last in the partner's pages.
// The msg-ids (keys anywhere) wait for write, and so do the counters: in
// chunks, each would be inserted among the previous chunks' keys in nodes
// that bbolt splits only at the commit, each insert moving the entries
// that came before it. So do the feed's types and the public events by
// id: a chunk would rewrite each partner's last block, a span writes it
// once. The partners keep their numbers (group) for them.
func (w *indexWrites) writeAppended(tx *bolt.Tx) error {
	if err := w.writeIndex(tx, indexFeedEntries, w.ranks()); err != nil {
		return err
	}
	// What bbolt was given stays: it keeps the values (and mem the keys)
	// until the transaction commits.
	w.puts[indexFeedEntries] = w.puts[indexFeedEntries][:0]
	return nil
}

// ranks returns each partner's place in the order of their ids, the order
// of their buckets in a partner index. The order only spares bbolt work:
// the file holds the same keys and values in any order.
func (w *indexWrites) ranks() []int32 { return rankNames(w.partner) }

// rankNames returns each name's place in the order of names.
func rankNames(names []string) []int32 {
	byName := make([]int32, len(names))
	for g := range byName {
		byName[g] = int32(g)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	rank := make([]int32, len(names))
	for r, g := range byName {
		rank[g] = int32(r)
	}
	return rank
}

// sortByGroup returns kvs in key order: placed group by group in the order
// of their ranks (a counting sort), then each group sorted unless it is
// already (a partner's feed entries come in sequence order), stably.
// Sorting the whole as one compared every key with a dozen others; a
// partner has a few dozen in a rebuild's transaction.
func sortByGroup(kvs []keyValue, rank []int32) []keyValue {
	rankOf := func(kv keyValue) int32 {
		if len(rank) == 0 {
			return 0 // no partner: one group
		}
		return rank[kv.group]
	}
	start := make([]int, max(len(rank), 1)+1)
	for _, kv := range kvs {
		start[rankOf(kv)+1]++
	}
	for r := 1; r < len(start); r++ {
		start[r] += start[r-1]
	}
	sorted := make([]keyValue, len(kvs))
	next := slices.Clone(start)
	for _, kv := range kvs {
		r := rankOf(kv)
		sorted[next[r]] = kv
		next[r]++
	}
	byKey := func(a, b keyValue) int { return bytes.Compare(a.k, b.k) }
	for r := 0; r+1 < len(start); r++ {
		group := sorted[start[r]:start[r+1]]
		if !slices.IsSortedFunc(group, byKey) {
			slices.SortStableFunc(group, byKey)
		}
	}
	return sorted
}
