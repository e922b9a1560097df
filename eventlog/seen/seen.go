package seen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// Set remembers ids for a while, in a KV bucket every instance shares:
// the vendor edge keeps the ids of vendor events it has fully handled, so a
// replay is acknowledged without being handled again, on any instance.
type Set struct {
	kv jetstream.KeyValue
}

// Open opens the set called name, which forgets an id ttl after it
// was added.
func Open(ctx context.Context, l *eventlog.Ledger, name string, ttl time.Duration) (*Set, error) {
	kv, err := l.OperationalBucket(ctx, "HANDLED_"+strings.ToUpper(name), "SEEN_"+strings.ToUpper(name), "Ids already handled: "+name+".", ttl)
	if err != nil {
		return nil, err
	}
	return &Set{kv: kv}, nil
}

// Has reports whether id was added and not yet forgotten.
func (s *Set) Has(ctx context.Context, id string) (bool, error) {
	_, err := s.kv.Get(ctx, seenKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, eventlog.NATSErr("seen set", err)
	}
	return true, nil
}

// Add remembers id.
func (s *Set) Add(ctx context.Context, id string) error {
	if _, err := s.kv.Put(ctx, seenKey(id), []byte{1}); err != nil {
		return eventlog.NATSErr("seen set", err)
	}
	return nil
}

// seenKey maps any id to a valid KV key.
func seenKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
