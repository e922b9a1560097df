package projections

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
)

// A bucket of blocks holds what a map would: keys put in transactions of
// every size and in every order (after the last block, in the middle,
// before the first, again with values of other lengths, short and over
// 127 bytes) are read back by blockGet, absent keys are not found, no
// block is over its size or under a key that is not its first entry's, and
// the dump lists every entry as the map holds it.
func TestBlocksHoldWhatWasPut(t *testing.T) {
	db := tempBolt(t)
	name := []byte("blocks")
	const size = 4
	want := map[string]string{}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 300 {
		batch := map[string]string{}
		for range 1 + rng.IntN(30) {
			var k string
			switch rng.IntN(3) {
			case 0: // about in order, as a partner's ids
				k = fmt.Sprintf("k%06d", round*50+rng.IntN(50))
			case 1: // anywhere
				k = fmt.Sprintf("k%06d", rng.IntN(15000))
			default: // before every key so far
				k = fmt.Sprintf("a%06d", 1000-round*3)
			}
			batch[k] = fmt.Sprintf("%d:%s", round, strings.Repeat("v", rng.IntN(300)))
		}
		kvs := make([]keyValue, 0, len(batch))
		for _, k := range slices.Sorted(maps.Keys(batch)) {
			kvs = append(kvs, keyValue{k: []byte(k), v: []byte(batch[k])})
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			mem := arena{block: 4096}
			return putInBlocks(b, kvs, size, &mem, false)
		}); err != nil {
			t.Fatal(err)
		}
		maps.Copy(want, batch)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		for k, v := range want {
			if got, err := blockGet(b.Cursor(), []byte(k)); string(got) != v || err != nil {
				return fmt.Errorf("%s = %.20q (%v), want %.20q", k, got, err, v)
			}
			for _, absent := range []string{k + "0", k[:len(k)-1]} {
				if _, ok := want[absent]; !ok {
					if got, err := blockGet(b.Cursor(), []byte(absent)); got != nil || err != nil {
						return fmt.Errorf("found %s, which was never put (%v)", absent, err)
					}
				}
			}
		}
		for _, absent := range []string{"", "0", "zzz"} {
			if got, err := blockGet(b.Cursor(), []byte(absent)); got != nil || err != nil {
				return fmt.Errorf("found %q, which was never put (%v)", absent, err)
			}
		}
		blocks := 0
		err := b.ForEach(func(key, block []byte) error {
			blocks++
			n := 0
			for k, _, rest, ok := nextEntry(block); ok; k, _, rest, ok = nextEntry(rest) {
				if n == 0 && !bytes.Equal(k, key) {
					return fmt.Errorf("block %s starts with %s", key, k)
				}
				if n++; n > size {
					return fmt.Errorf("block %s holds more than %d entries", key, size)
				}
			}
			if n == 0 {
				return fmt.Errorf("block %s holds no entry", key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if blocks*size < len(want) {
			return fmt.Errorf("%d blocks for %d keys", blocks, len(want))
		}
		got := map[string]string{}
		if err := dumpBlocks(b, "", got); err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("the dump holds %d entries, want the %d put", len(got), len(want))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A run's cursor walks its entries across blocks and resumes after any
// key, present or not; a block with bytes that are not an entry ends the
// walk with an error rather than dropping what follows.
func TestRunCursorWalksBlocks(t *testing.T) {
	db := tempBolt(t)
	var kvs []keyValue
	for i := range 23 {
		kvs = append(kvs, keyValue{k: fmt.Appendf(nil, "k%03d", i*2), v: fmt.Appendf(nil, "v%d", i)})
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("run"))
		if err != nil {
			return err
		}
		mem := arena{block: 4096}
		if err := putInBlocks(b, kvs, 4, &mem, false); err != nil {
			return err
		}
		bad, err := tx.CreateBucket([]byte("bad"))
		if err != nil {
			return err
		}
		if err := bad.Put([]byte("k000"), append(appendEntry(nil, []byte("k000"), []byte("v")), 9)); err != nil {
			return err
		}
		return bad.Put([]byte("k010"), appendEntry(nil, []byte("k010"), []byte("v")))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for _, after := range []string{"", "a", "k000", "k001", "k013", "k044", "k045", "z"} {
			r := &runCursor{c: tx.Bucket([]byte("run")).Cursor()}
			var a []byte
			if after != "" {
				a = []byte(after)
			}
			var got []string
			for ok := r.seekAfter(a); ok; ok = r.next() {
				got = append(got, string(r.k)+"="+string(r.v))
			}
			var want []string
			for _, kv := range kvs {
				if after == "" || string(kv.k) > after {
					want = append(want, string(kv.k)+"="+string(kv.v))
				}
			}
			if !slices.Equal(got, want) || r.err != nil {
				return fmt.Errorf("after %q: %v (%v), want %v", after, got, r.err, want)
			}
		}
		r := &runCursor{c: tx.Bucket([]byte("bad")).Cursor()}
		n := 0
		for ok := r.seekAfter(nil); ok; ok = r.next() {
			n++
		}
		if n != 1 || r.err == nil {
			return fmt.Errorf("a malformed block: %d entries read, error %v; want 1 and an error", n, r.err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A block that ends in bytes that are not an entry is never read as
// missing the keys it may hold there, nor written again without them: a
// lookup past its last entry, a put into it, and a counters transaction
// that reads a deposit from it fail; the keys before the bad bytes and
// other blocks still read.
func TestABadBlockFailsRatherThanLoseKeys(t *testing.T) {
	db := tempBolt(t)
	good := appendEntry(appendEntry(nil, []byte("pt_a/t1"), appendDeposit(nil, creditedDeposit(100))), []byte("pt_a/t2"), appendDeposit(nil, creditedDeposit(200)))
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketDeposits)
		if err != nil {
			return err
		}
		if err := b.Put([]byte("pt_a/t1"), append(good[:len(good):len(good)], 0x05, 'x')); err != nil {
			return err
		}
		return b.Put([]byte("pt_b/t1"), appendEntry(nil, []byte("pt_b/t1"), appendDeposit(nil, creditedDeposit(300))))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDeposits).Cursor()
		if v, err := blockGet(c, []byte("pt_a/t2")); err != nil || v == nil {
			return fmt.Errorf("a key before the bad bytes: %q, %v", v, err)
		}
		if v, err := blockGet(c, []byte("pt_a/t3")); err == nil {
			return fmt.Errorf("a key that may lie in the bad bytes read as %q, no error", v)
		}
		if v, err := blockGet(c, []byte("pt_b/t1")); err != nil || v == nil {
			return fmt.Errorf("another block: %q, %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	put := db.Update(func(tx *bolt.Tx) error {
		mem := arena{block: 4096}
		return putInBlocks(tx.Bucket(bucketDeposits), []keyValue{{k: []byte("pt_a/t3"), v: []byte("v")}}, depositBlock, &mem, false)
	})
	counted := db.Update(func(tx *bolt.Tx) error {
		c := newCounters(tx, 1)
		if _, err := readDeposit(c.get(bucketDeposits, []byte("pt_a/t9"))); err != nil {
			return err
		}
		c.put(bucketDeposits, []byte("pt_a/t9"), appendDeposit(nil, creditedDeposit(900)))
		return c.write()
	})
	if put == nil || counted == nil {
		t.Fatalf("a put into the bad block: %v; a counters transaction reading from it: %v; want both to fail", put, counted)
	}
}

// creditedDeposit is a deposit's state as a credit records it.
func creditedDeposit(amount int) domain.Deposit {
	return domain.Deposit{ChurchID: "ch_x", AccountRef: "acct", Amount: domain.Hundredths(amount), BankTS: "2026-11-27T00:00:00Z", Credited: true}
}

// tempBolt is a bbolt file of the test's own, closed when it ends.
func tempBolt(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "test.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
