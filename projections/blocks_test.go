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
)

// A bucket of blocks holds what a map would: keys put in transactions of
// every size and in every order (after the last block, in the middle,
// before the first, again with values of other lengths, short and over
// 127 bytes) are read back by blockGet, absent keys are not found, no
// block is over its size or under a key that is not its first entry's, and
// the dump lists every entry as the map holds it.
func TestBlocksHoldWhatWasPut(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
			return putInBlocks(b, kvs, size, &mem)
		}); err != nil {
			t.Fatal(err)
		}
		maps.Copy(want, batch)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		for k, v := range want {
			if got := blockGet(b.Cursor(), []byte(k)); string(got) != v {
				return fmt.Errorf("%s = %.20q, want %.20q", k, got, v)
			}
			for _, absent := range []string{k + "0", k[:len(k)-1]} {
				if _, ok := want[absent]; !ok && blockGet(b.Cursor(), []byte(absent)) != nil {
					return fmt.Errorf("found %s, which was never put", absent)
				}
			}
		}
		for _, absent := range []string{"", "0", "zzz"} {
			if blockGet(b.Cursor(), []byte(absent)) != nil {
				return fmt.Errorf("found %q, which was never put", absent)
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
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
		if err := putInBlocks(b, kvs, 4, &mem); err != nil {
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
