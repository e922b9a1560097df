package keyuse

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// Store keeps the hour each API key was last used, for the partner's list
// of its keys. It is an operational record, not a fact of the ledger: a KV
// bucket persisted asynchronously, written at most once an hour per key and
// instance, and never by the request that uses the key (Note returns at
// once), so authentication costs no write.
type Store struct {
	kv jetstream.KeyValue
	// noted holds, by key id, the last hour (unix seconds) this instance
	// wrote, so a key used all hour is written once.
	noted sync.Map // string → *atomic.Int64
}

// noteWait bounds a write of a key's hour.
const noteWait = 5 * time.Second

// Open opens (creating as needed) the bucket of the keys' last use.
func Open(ctx context.Context, l *eventlog.Ledger) (*Store, error) {
	kv, err := l.OperationalBucket(ctx, "KEY_USE", "", "The hour each API key was last used.", 0)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv}, nil
}

// Note records that the key was used at, rounded down to the hour, unless
// this instance already did for that hour. The write runs on its own
// goroutine; a failed one is tried again at the key's next use.
func (u *Store) Note(keyID string, at time.Time) {
	hour := at.Truncate(time.Hour).Unix()
	v, ok := u.noted.Load(keyID)
	if !ok {
		// Only a key's first use here allocates.
		v, _ = u.noted.LoadOrStore(keyID, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	old := last.Load()
	if old >= hour || !last.CompareAndSwap(old, hour) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), noteWait)
		defer cancel()
		if _, err := u.kv.Put(ctx, keyID, []byte(strconv.FormatInt(hour, 10))); err != nil {
			last.CompareAndSwap(hour, old)
		}
	}()
}

// Last returns the hour the key was last used; zero when it never was (or
// not since this record was kept).
func (u *Store) Last(ctx context.Context, keyID string) (time.Time, error) {
	e, err := u.kv.Get(ctx, keyID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, eventlog.NATSErr("key use "+keyID, err)
	}
	hour, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("key use %s: %w", keyID, err)
	}
	return time.Unix(hour, 0).UTC(), nil
}
