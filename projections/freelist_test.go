package projections

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A store's commits leave bbolt's list of free pages out, however long it
// is, and Close writes it, so that the next Open reads it.
func TestTheStoreWritesItsFreePagesWhenItClosesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Thousands of free pages: a bucket of 20 MB, then dropped.
	value := make([]byte, 100)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("scratch"))
		if err != nil {
			return err
		}
		for i := range 200_000 {
			if err := b.Put(fmt.Appendf(nil, "%08d", i), value); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("scratch")) }); err != nil {
		t.Fatal(err)
	}
	// A small commit: a few pages, not the 40 KB list of 5,000 free ones.
	for range 2 { // the first releases the dropped bucket's pages
		st := s.db.Stats()
		before := st.TxStats.GetPageAlloc()
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("probe"), value) }); err != nil {
			t.Fatal(err)
		}
		st = s.db.Stats()
		if alloc := st.TxStats.GetPageAlloc() - before; alloc > 4*4096 {
			t.Fatalf("a one-key commit allocated %d bytes with %d pages free", alloc, s.db.Stats().FreePageN)
		}
	}
	free := s.db.Stats().FreePageN
	if free < 4000 {
		t.Fatalf("%d pages free, want thousands", free)
	}
	if freelistStored(t, path) {
		t.Fatal("the free pages are in the file before Close")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !freelistStored(t, path) {
		t.Fatal("Close did not write the free pages")
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.db.Stats().FreePageN; got < free-64 { // less what the list itself took
		t.Fatalf("reopened with %d pages free, closed with %d", got, free)
	}
}

// freelistStored reports whether the newest of the file's two meta pages
// points at a list of free pages (bbolt's layout: after the 16-byte page
// header, the page size at 8, the free list's page at 32, the
// transaction at 48; no list is the largest page id).
func freelistStored(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(i int) (freelist, txid uint64) {
		size := int(binary.LittleEndian.Uint32(data[16+8:]))
		m := data[i*size+16:]
		return binary.LittleEndian.Uint64(m[32:]), binary.LittleEndian.Uint64(m[48:])
	}
	f0, tx0 := meta(0)
	f1, tx1 := meta(1)
	if tx1 > tx0 {
		f0 = f1
	}
	return f0 != ^uint64(0)
}
