package projections

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
)

// The feed table: every partner's public events, in ledger order, as their
// stored envelopes. It is what GET /v1/events reads, so a page costs what
// it returns (a cursor seek and limit+1 keys) whatever the ledger's length
// or the number of other partners; reading the same events from the ledger
// makes the server step over every other partner's events and count
// pending messages over every subject. The projector writes it in the same
// transaction as the checkpoint, so a page never shows half of a batch, and
// the position of an event in it is its ledger sequence: feed cursors are
// the same before and after this table existed. indexWrites writes it.
var (
	// bucketFeed holds a bucket per partner (see partnerIndex): <seq> →
	// the event's envelope.
	bucketFeed = bucket("feed")
	// bucketFeedTypes holds a bucket per partner: "<type>/<seq>" → the
	// sequences of that type's events from seq on, big-endian, ascending,
	// up to typeBlock of them: each type's events, for pages filtered by
	// type, in blocks (see typeBlock).
	bucketFeedTypes = bucket("feed_types")
)

// typeBlock is how many sequences a block of the feed's types holds. A key
// an event cost the replay about 2 µs of the process's CPU at a million
// events (bbolt's seek and insert, the page writes, the collector), whatever
// its value; in blocks, a rebuild's span
// makes a put or two a partner and type, and a page reads a block or two.
// A live commit rewrites the last block, at most 1 KiB.
const typeBlock = 128

// partnerIndexOf returns the partner's bucket in a partner index, nil when
// the partner has no event there.
func partnerIndexOf(tx *bolt.Tx, index []byte, partner string) *bolt.Bucket {
	return tx.Bucket(index).Bucket([]byte(partner))
}

func feedTypePrefix(typ string) []byte { return []byte(typ + "/") }

func seqKey(prefix []byte, seq uint64) []byte {
	k := make([]byte, len(prefix)+8)
	copy(k, prefix)
	binary.BigEndian.PutUint64(k[len(prefix):], seq)
	return k
}

// FeedEntry is one event of a partner's feed.
type FeedEntry struct {
	Seq  uint64
	Data []byte
}

// Feed returns up to limit of the partner's public events after sequence
// after, oldest first, of the given types (every type when none), and
// whether more follow. With several types, each type's index is walked for
// limit+1 entries and the walks are merged, so the cost follows the page.
func (s *Store) Feed(partner string, types []string, after uint64, limit int) ([]FeedEntry, bool, error) {
	var (
		out  []FeedEntry
		more bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		feed := partnerIndexOf(tx, bucketFeed, partner)
		if feed == nil {
			out = []FeedEntry{}
			return nil
		}
		var seqs []uint64
		if len(types) == 0 {
			seqs = walkSeqs(feed.Cursor(), nil, after, limit+1)
		} else if byType := partnerIndexOf(tx, bucketFeedTypes, partner); byType != nil {
			seqs = mergeSeqs(byType, types, after, limit+1)
		}
		if len(seqs) > limit {
			seqs, more = seqs[:limit], true
		}
		out = make([]FeedEntry, len(seqs))
		for i, seq := range seqs {
			// bbolt's values live only as long as the transaction.
			out[i] = FeedEntry{Seq: seq, Data: bytes.Clone(feed.Get(seqKey(nil, seq)))}
		}
		return nil
	})
	return out, more, err
}

// LatestFeed returns the partner's newest public events, up to limit,
// newest first: the feed's table walked from its end, so the cost follows
// what it returns.
func (s *Store) LatestFeed(partner string, limit int) ([]FeedEntry, error) {
	out := []FeedEntry{}
	err := s.view(func(tx *bolt.Tx) error {
		feed := partnerIndexOf(tx, bucketFeed, partner)
		if feed == nil {
			return nil
		}
		c := feed.Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			if len(k) != 8 {
				continue
			}
			out = append(out, FeedEntry{Seq: binary.BigEndian.Uint64(k), Data: bytes.Clone(v)})
		}
		return nil
	})
	return out, err
}

// walkSeqs returns up to n sequences of an index whose keys are prefix and
// a big-endian sequence, from the first above after.
func walkSeqs(c *bolt.Cursor, prefix []byte, after uint64, n int) []uint64 {
	var out []uint64
	for k, _ := c.Seek(seqKey(prefix, after+1)); k != nil && bytes.HasPrefix(k, prefix) && len(out) < n; k, _ = c.Next() {
		out = append(out, binary.BigEndian.Uint64(k[len(prefix):]))
	}
	return out
}

// mergeSeqs merges the first n sequences after after of each type's blocks
// in a partner's bucket of the feed's types.
func mergeSeqs(b *bolt.Bucket, types []string, after uint64, n int) []uint64 {
	var all []uint64
	for _, t := range types {
		all = mergeSorted(all, walkTypeSeqs(b.Cursor(), feedTypePrefix(t), after, n))
	}
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// walkTypeSeqs returns up to n sequences after after from the blocks whose
// keys are prefix and their first sequence: from the block before the
// first that starts past after (it may hold some past after), on.
func walkTypeSeqs(c *bolt.Cursor, prefix []byte, after uint64, n int) []uint64 {
	from := seqKey(prefix, after+1)
	k, v := atOrBefore(c, from)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		k, v = c.Seek(from) // no block of the type starts at or before from
	}
	var out []uint64
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < n; k, v = c.Next() {
		for i := 0; i+8 <= len(v) && len(out) < n; i += 8 {
			if seq := binary.BigEndian.Uint64(v[i:]); seq > after {
				out = append(out, seq)
			}
		}
	}
	return out
}

// atOrBefore moves c to the last key at or before key and returns it (nil
// when every key is after key).
func atOrBefore(c *bolt.Cursor, key []byte) (k, v []byte) {
	k, v = c.Seek(key)
	switch {
	case k == nil:
		return c.Last()
	case bytes.Equal(k, key):
		return k, v
	default:
		return c.Prev()
	}
}

func mergeSorted(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// FeedItem returns the envelope of the partner's public event at seq.
func (s *Store) FeedItem(partner string, seq uint64) ([]byte, bool, error) {
	var data []byte
	err := s.view(func(tx *bolt.Tx) error {
		if feed := partnerIndexOf(tx, bucketFeed, partner); feed != nil {
			data = bytes.Clone(feed.Get(seqKey(nil, seq)))
		}
		return nil
	})
	return data, data != nil, err
}

// FeedPositionAt returns the position to read the partner's feed after to
// reach its first event that occurred at t or later. It bisects the feed by
// sequence: occurred_at follows ledger order up to the skew between the
// clocks of the instances, so a caller wanting every event from t reads
// from a little earlier and filters by time.
func (s *Store) FeedPositionAt(partner string, t time.Time) (uint64, error) {
	want := domain.FormatTime(t)
	var pos uint64
	err := s.view(func(tx *bolt.Tx) error {
		feed := partnerIndexOf(tx, bucketFeed, partner)
		if feed == nil {
			return nil
		}
		c := feed.Cursor()
		lo, hi := uint64(1), uint64(math.MaxUint64)
		for lo < hi {
			mid := lo + (hi-lo)/2
			k, v := c.Seek(seqKey(nil, mid))
			if k == nil || occurredAt(v) >= want {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		pos = lo - 1
		return nil
	})
	return pos, err
}

// occurredAt reads an envelope's occurred_at, which is written in
// domain.TimeLayout and so compares as a string.
func occurredAt(envelope []byte) string {
	env, _ := domain.ReadEnvelopeHeader(envelope)
	return env.OccurredAt
}

// FeedEvent is a feed entry's place and envelope header.
type FeedEvent struct {
	Seq  uint64
	ID   string
	Type string
}

// recoveryScan is how many feed entries a recovery page reads at a time.
const recoveryScan = 500

// RecoveryPage returns up to limit events of a recovery's range after
// position after, in ledger order, the position its scan reached (past
// entries outside the range), and whether the range is exhausted there.
func (s *Store) RecoveryPage(r *domain.WebhookRecovery, after uint64, limit int) ([]FeedEvent, uint64, bool, error) {
	var out []FeedEvent
	for len(out) < limit {
		entries, more, err := s.Feed(r.PartnerID, r.Types, after, recoveryScan)
		if err != nil {
			return nil, after, false, err
		}
		for _, e := range entries {
			if e.Seq > r.UpTo {
				return out, after, true, nil
			}
			env, err := domain.ReadEnvelopeHeader(e.Data)
			if err != nil {
				return nil, after, false, err
			}
			at, err := time.Parse(domain.TimeLayout, env.OccurredAt)
			if err != nil {
				return nil, after, false, err
			}
			after = e.Seq
			if r.Includes(env.Type, at) {
				out = append(out, FeedEvent{Seq: e.Seq, ID: env.ID, Type: env.Type})
				if len(out) == limit {
					return out, after, false, nil
				}
			}
		}
		if !more {
			return out, after, true, nil
		}
	}
	return out, after, false, nil
}
