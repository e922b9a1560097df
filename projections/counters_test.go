package projections

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// The counters write, for each key, the value of its last put, whether the
// bucket was read in the transaction (an index) or only put to (a list,
// where a key may come twice), and a get sees the transaction's own puts
// before the file's values; adders may build keys and values in the
// scratch, which the next key or value reuses.
func TestCountersWriteTheLastPutOfEachKey(t *testing.T) {
	db := tempBolt(t)
	// listed is read once, half way; indexed at every put; blind never.
	listed, indexed, blind := []byte("listed"), []byte("indexed"), []byte("blind")
	want := map[string]map[string]string{"listed": {}, "indexed": {}, "blind": {}}
	// The file holds values the transaction reads and overwrites, or not.
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{listed, indexed, blind} {
			b, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			for i := range 20 {
				k, v := counterKey(i*5), fmt.Sprintf("file%d", i)
				want[string(name)][k] = v
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	err := db.Update(func(tx *bolt.Tx) error {
		c := newCounters(tx, 4)
		for i := range 3000 {
			name := [][]byte{listed, indexed, blind}[i/1000]
			k := c.key(counterKey(rng.IntN(100)))
			if string(name) == "indexed" || i == 500 {
				// Read back what the transaction or the file holds.
				if got, want := string(c.get(name, k)), want[string(name)][string(k)]; got != want {
					return fmt.Errorf("get %s/%s = %q, want %q", name, k, got, want)
				}
			}
			// Values of changing lengths, built in the scratch.
			v := fmt.Appendf(c.scratch(), "put%d%s", i, make([]byte, rng.IntN(3)))
			want[string(name)][string(k)] = string(v)
			c.put(name, k, v)
		}
		return c.write()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for name, kvs := range want {
			n := 0
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				n++
				if string(v) != kvs[string(k)] {
					return fmt.Errorf("%s/%s = %q, want %q", name, k, v, kvs[string(k)])
				}
				return nil
			}); err != nil {
				return err
			}
			if n != len(kvs) {
				return fmt.Errorf("%s holds %d keys, want %d", name, n, len(kvs))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// counterKey is the i-th of a hundred keys, most of them under a partner's
// prefix ("<partner>/..."), among them prefixes that begin others ("pt",
// "pt-", "ptq") and keys with no slash.
func counterKey(i int) string {
	if i%7 == 0 {
		return fmt.Sprintf("pt%03d", i)
	}
	return fmt.Sprintf("%s/k%03d", []string{"pt", "pt-", "ptq", "a", ""}[i%5], i)
}

// sortByPartner sorts as a stable sort of the whole by key does, whatever
// the partners' prefixes and the order the keys came in.
func TestSortByPartnerIsAStableSortByKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var kvs []keyValue
	for i := range 5000 {
		k := counterKey(rng.IntN(100))
		if i%2 == 0 {
			// Half the keys come in order, as a partner's traces do.
			k = counterKey(i * 100 / 5000)
		}
		kvs = append(kvs, keyValue{k: []byte(k), v: fmt.Append(nil, i)})
	}
	want := slices.Clone(kvs)
	slices.SortStableFunc(want, func(a, b keyValue) int { return bytes.Compare(a.k, b.k) })
	got := sortByPartner(kvs)
	if len(got) != len(want) {
		t.Fatalf("%d sorted, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].k, want[i].k) || !bytes.Equal(got[i].v, want[i].v) {
			t.Fatalf("at %d: %q=%q, want %q=%q", i, got[i].k, got[i].v, want[i].k, want[i].v)
		}
	}
}

// An arena that is reset carves the blocks it made again, from the first,
// skipping one too small for a slice (a larger slice has a block of its
// own): a cycle of the same carves after a reset allocates nothing, and
// what it carves is the first cycle's memory.
func TestArenaCarvesItsBlocksAgainAfterReset(t *testing.T) {
	mem := arena{block: 64}
	sizes := []int{40, 20, 100, 10, 64, 3}
	cycle := func() [][]byte {
		var got [][]byte
		for i, n := range sizes {
			b := mem.carve(n)
			if len(b) != 0 || cap(b) != n {
				t.Fatalf("carve(%d): len %d, cap %d; want 0 and %d", n, len(b), cap(b), n)
			}
			got = append(got, append(b, bytes.Repeat([]byte{byte('a' + i)}, n)...))
		}
		return got
	}
	first := cycle()
	made := len(mem.blocks)
	for i, b := range first {
		if !bytes.Equal(b, bytes.Repeat([]byte{byte('a' + i)}, sizes[i])) {
			t.Fatalf("slice %d was overwritten by a later carve: %q", i, b)
		}
	}
	mem.reset()
	again := cycle()
	for i := range again {
		if unsafe.SliceData(again[i]) != unsafe.SliceData(first[i]) {
			t.Fatalf("slice %d after the reset is not carved where it was before", i)
		}
	}
	if len(mem.blocks) != made {
		t.Fatalf("the same carves after a reset made %d blocks; want the %d made before", len(mem.blocks)-made, made)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		mem.reset()
		for _, n := range sizes {
			mem.carve(n)
		}
	}); allocs != 0 {
		t.Fatalf("a cycle after a reset allocated %.0f times; want none", allocs)
	}
	// A carve larger than any block made gets a new one, kept for later.
	mem.reset()
	if b := mem.carve(500); cap(b) != 500 || len(mem.blocks) != made+1 {
		t.Fatalf("carve(500) after a reset: cap %d, %d blocks; want 500 and %d", cap(b), len(mem.blocks), made+1)
	}
}
