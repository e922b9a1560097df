package reservations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// DefaultLease is how long a reservation holds against other holders
// unless configured otherwise: the holder's append must be stored by then.
const DefaultLease = 30 * time.Second

// Store keeps the reservations of one environment's ledger.
type Store struct {
	ledger *eventlog.Ledger
	kv     jetstream.KeyValue
	lease  time.Duration
	// instance and boot name this process, so that a reservation left by
	// a crashed earlier boot of the same instance is stale at once.
	instance, boot string
}

// Config tunes the store.
type Config struct {
	// Lease is how long a reservation holds against other holders; 0
	// means DefaultLease, which the service runs with (its use cases
	// append up to 15 s before a lease ends). Tests shorten it to play a
	// holder that crashed.
	Lease time.Duration
	// Instance is a stable name of this instance (one process at a time).
	Instance string
}

// Open opens (creating as needed) the reservations bucket.
func Open(ctx context.Context, l *eventlog.Ledger, cfg Config) (*Store, error) {
	kv, err := l.OperationalBucket(ctx, bucket, "", "Reservations of values that must stay unique (external ids), one key per value.", 0)
	if err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	return &Store{ledger: l, kv: kv, lease: cfg.Lease, instance: cfg.Instance, boot: strconv.FormatInt(time.Now().UnixNano(), 36)}, nil
}

// bucket is the name of the reservations bucket, without the environment.
const bucket = "RESERVATIONS"

// ExternalID is the key of a partner's external id: a hash, since an
// external id may hold what a KV key cannot.
func ExternalID(partner, ext string) string {
	sum := sha256.Sum256([]byte("external_id\x00" + partner + "\x00" + ext))
	return hex.EncodeToString(sum[:])
}

type record struct {
	Holder   string    `json:"holder"`
	Instance string    `json:"instance"`
	Boot     string    `json:"boot"`
	Until    time.Time `json:"until"`
}

// Reservation is a key's reservation as read or written.
type Reservation struct {
	// Mine says the holder asked for holds it.
	Mine bool
	// Stale says another holder has it whose lease is over or whose
	// process is gone: it may be taken over (TakeOver), once no stored
	// event took the value.
	Stale bool
	// Until is when the lease ends.
	Until time.Time

	key string
	rev uint64
}

// errBusy means a reservation kept changing under every attempt to read
// it: retry later.
var errBusy = fmt.Errorf("%w: a reservation kept changing", domain.ErrUnavailable)

// reserveAttempts bounds Reserve's attempts to create or read a
// reservation; the waits between them add up to about half a second.
const reserveAttempts = 8

// Reserve reserves key for holder: it creates the reservation, or renews
// holder's own (an earlier run of the same request), or answers another
// holder's as it stands (Mine false).
func (s *Store) Reserve(ctx context.Context, key, holder string) (Reservation, error) {
	for attempt := 1; attempt <= reserveAttempts; attempt++ {
		r, data := s.mine(holder)
		rev, err := s.kv.Create(ctx, key, data)
		if err == nil {
			return r.at(key, rev), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if rev, ok := s.stored(ctx, key, data); ok {
				return r.at(key, rev), nil
			}
			return Reservation{}, eventlog.NATSErr("reserve", err)
		}
		cur, found, err := s.read(ctx, key)
		if err != nil {
			return Reservation{}, err
		}
		if !found {
			// Released meanwhile, or, on a cluster, another holder's
			// create is accepted but not yet applied (a replicated
			// stream checks a create against those in flight, a read
			// sees only those applied): look again in a moment.
			if err := eventlog.Backoff(ctx, attempt); err != nil {
				return Reservation{}, eventlog.NATSErr("reserve", err)
			}
			continue
		}
		if cur.holder != holder {
			return cur.Reservation, nil
		}
		if r, ok, err := s.TakeOver(ctx, cur.Reservation, holder); err != nil || ok {
			return r, err
		}
	}
	return Reservation{}, errBusy
}

// TakeOver moves r, as read, to holder, and reports false when it changed
// since.
func (s *Store) TakeOver(ctx context.Context, r Reservation, holder string) (Reservation, bool, error) {
	mine, data := s.mine(holder)
	rev, err := s.kv.Update(ctx, r.key, data, r.rev)
	if err == nil {
		return mine.at(r.key, rev), true, nil
	}
	if rev, ok := s.stored(ctx, r.key, data); ok {
		return mine.at(r.key, rev), true, nil
	}
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return Reservation{}, false, nil
	}
	return Reservation{}, false, eventlog.NATSErr("take over a reservation", err)
}

// Held is key's reservation as it stands, whoever holds it; found is false
// when there is none.
func (s *Store) Held(ctx context.Context, key string) (r Reservation, found bool, err error) {
	cur, found, err := s.read(ctx, key)
	return cur.Reservation, found, err
}

// Release removes r, unless it changed since it was read: the value it
// held is free again (the event that stored it was superseded).
func (s *Store) Release(ctx context.Context, r Reservation) error {
	err := s.kv.Delete(ctx, r.key, jetstream.LastRevision(r.rev))
	if err == nil || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil
	}
	return eventlog.NATSErr("release a reservation", err)
}

// mine is a new reservation for holder and its stored form.
func (s *Store) mine(holder string) (Reservation, []byte) {
	until := time.Now().Add(s.lease)
	data, _ := json.Marshal(record{Holder: holder, Instance: s.instance, Boot: s.boot, Until: until})
	return Reservation{Mine: true, Until: until}, data
}

func (r Reservation) at(key string, rev uint64) Reservation {
	r.key, r.rev = key, rev
	return r
}

// current is a reservation read, with its holder.
type current struct {
	Reservation
	holder string
}

// read reads key's reservation as the bucket's leader knows it: a replica
// may not have applied one another instance was just told it holds.
func (s *Store) read(ctx context.Context, key string) (current, bool, error) {
	value, rev, found, err := s.ledger.LeaderKV(ctx, s.kv, key)
	if err != nil || !found {
		return current{}, false, err
	}
	var rec record
	if err := json.Unmarshal(value, &rec); err != nil {
		return current{}, false, fmt.Errorf("reservation %s: %w", key, err)
	}
	stale := time.Now().After(rec.Until) || (s.instance != "" && rec.Instance == s.instance && rec.Boot != s.boot)
	return current{Reservation: Reservation{Stale: stale, Until: rec.Until, key: key, rev: rev}, holder: rec.Holder}, true, nil
}

// stored reports whether a write of data whose answer did not arrive (a
// node lost meanwhile) was stored after all.
func (s *Store) stored(ctx context.Context, key string, data []byte) (uint64, bool) {
	value, rev, found, err := s.ledger.LeaderKV(ctx, s.kv, key)
	if err != nil || !found || !bytes.Equal(value, data) {
		return 0, false
	}
	return rev, true
}
