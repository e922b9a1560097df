package projections

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

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
