package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/secrets"
)

// Retention is how long a key's record is kept after its last
// write. The contract promises at least 24 hours.
const Retention = 48 * time.Hour

// Store keeps Idempotency-Key records in a JetStream KV bucket, so a
// key holds across restarts and across every instance sharing the ledger.
// Stored responses are sealed, because they can hold one-time secrets (a
// webhook secret, a donor session url).
type Store struct {
	ledger *eventlog.Ledger
	kv     jetstream.KeyValue
	seal   *secrets.Sealer
	lease  time.Duration
	settle time.Duration
	// owner names this process's instance and boot, so that a record left
	// running by a crashed earlier boot of the same instance is taken over
	// at once instead of waiting out its lease.
	instance, boot string
}

// Config tunes the store.
type Config struct {
	// Lease is how long a request may run while it holds its key; the
	// transport cancels a request that runs longer. Default 30s.
	Lease time.Duration
	// Settle is how much longer the key stays held after the lease, for the
	// request to store its answer; only then may another request take the
	// key over (the first is presumed dead). Default 10s.
	Settle time.Duration
	// Instance is a stable name of this instance (one process at a time).
	Instance string
}

// DefaultLease is how long a request may run holding its key, unless
// configured otherwise; DefaultSettle is how much longer the key stays held
// for the request to store its answer.
const (
	DefaultLease  = 30 * time.Second
	DefaultSettle = 10 * time.Second
)

// Open opens the idempotency bucket.
func Open(ctx context.Context, l *eventlog.Ledger, secrets *secrets.Secrets, cfg Config) (*Store, error) {
	kv, err := l.OperationalBucket(ctx, requestsBucket, "IDEMPOTENCY", "Idempotency-Key records and their sealed responses.", Retention)
	if err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	return &Store{ledger: l, kv: kv, seal: secrets.Sealer("idempotency"), lease: cfg.Lease, settle: cfg.Settle, instance: cfg.Instance, boot: strconv.FormatInt(time.Now().UnixNano(), 36)}, nil
}

type idemRecord struct {
	State       string    `json:"state"` // running | done | released
	Fingerprint string    `json:"fingerprint"`
	Instance    string    `json:"instance"`
	Boot        string    `json:"boot"`
	LeaseUntil  time.Time `json:"lease_until"`
	Status      int       `json:"status,omitempty"`
	Body        []byte    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Nonce tells this request's claim from any other's.
	Nonce uint64 `json:"nonce,omitempty"`
}

// Claim is a running request's hold on its key.
type Claim struct {
	id  string
	rev uint64
	// Fingerprint identifies the request that holds the key.
	Fingerprint string
	// Takeover is true when the key was left running by a request that
	// died, or released by one that failed; the command must first look for
	// what that request appended.
	Takeover bool
	// RunUntil is when the request must have finished running; HoldUntil is
	// when its hold on the key ends, so its answer must be stored by then.
	RunUntil, HoldUntil time.Time
}

// ID names the key (scoped to its partner) without showing it: a hash, the
// same on every retry with the key, on every instance.
func (c Claim) ID() string { return c.id }

// MsgID is the ledger dedup id for the n-th command the request runs. It is
// the same on every retry with the same key, so the ledger stores the effect
// once.
func (c Claim) MsgID(n int) string { return requestMsgIDPrefix + c.id + ":" + strconv.Itoa(n) }

// requestMsgIDPrefix begins every dedup id a Claim makes.
const requestMsgIDPrefix = "idem:"

// IsRequestMsgID reports whether msgID is a dedup id a Claim made: the
// ids a retried request looks its earlier run's event up by. Every other
// id (an event's own, one derived from a vendor's event id) is looked up by
// the ledger's dedup alone.
func IsRequestMsgID(msgID string) bool { return strings.HasPrefix(msgID, requestMsgIDPrefix) }

// BeginResult says what to do with a request.
type BeginResult struct {
	// Claim is set when the request should run.
	Claim *Claim
	// Replay is set when the key already completed with the same request:
	// answer with the stored status and body.
	Replay *StoredResponse
	// Mismatch is true when the key was used for a different request.
	Mismatch bool
	// InFlight is true when the key's first request is still running.
	InFlight bool
	// RetryAfter suggests when to try again for InFlight.
	RetryAfter time.Duration
}

// StoredResponse is a completed request's answer.
type StoredResponse struct {
	Status int
	Body   []byte
}

// Begin claims key (scoped to scope, the partner) for a request with the
// given fingerprint, or says why the request must not run.
func (s *Store) Begin(ctx context.Context, scope, key, fingerprint string) (BeginResult, error) {
	id := recordID(scope, key)
	now := time.Now()
	rec := idemRecord{State: "running", Fingerprint: fingerprint, Instance: s.instance, Boot: s.boot, LeaseUntil: now.Add(s.lease + s.settle), CreatedAt: now, Nonce: rand.Uint64()}
	claim := func(rev uint64, takeover bool) BeginResult {
		return BeginResult{Claim: &Claim{id: id, rev: rev, Fingerprint: fingerprint, Takeover: takeover, RunUntil: now.Add(s.lease), HoldUntil: rec.LeaseUntil}}
	}
	for range 5 {
		data, _ := json.Marshal(rec)
		rev, err := s.kv.Create(ctx, id, data)
		if err == nil {
			return claim(rev, false), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if rev, ok := s.stored(ctx, id, data); ok {
				return claim(rev, false), nil
			}
			return BeginResult{}, eventlog.NATSErr("idempotency begin", err)
		}
		cur, revision, found, err := s.read(ctx, id, fingerprint)
		if errors.Is(err, errUnconfirmed) {
			return BeginResult{InFlight: true, RetryAfter: time.Second}, nil
		}
		if err != nil {
			return BeginResult{}, eventlog.NATSErr("idempotency begin", err)
		}
		if !found {
			continue // expired meanwhile; try to create again
		}
		switch {
		case cur.Fingerprint != fingerprint:
			return BeginResult{Mismatch: true}, nil
		case cur.State == "done":
			body, err := s.seal.Open(cur.Body, []byte(id))
			if err != nil {
				return BeginResult{}, eventlog.NATSErr("idempotency replay", err)
			}
			return BeginResult{Replay: &StoredResponse{Status: cur.Status, Body: body}}, nil
		case cur.State == "running" && !s.abandoned(cur, now):
			return BeginResult{InFlight: true, RetryAfter: retryAfter(cur.LeaseUntil.Sub(now))}, nil
		}
		// The first request died or failed: take the key over.
		rec.CreatedAt = cur.CreatedAt
		data, _ = json.Marshal(rec)
		rev, err = s.kv.Update(ctx, id, data, revision)
		if err == nil {
			return claim(rev, true), nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if rev, ok := s.stored(ctx, id, data); ok {
				return claim(rev, true), nil
			}
			return BeginResult{}, eventlog.NATSErr("idempotency takeover", err)
		}
	}
	return BeginResult{InFlight: true, RetryAfter: time.Second}, nil
}

// stored reports whether a write of data to the record whose answer did not
// arrive (a node lost meanwhile) was stored after all: the record holds
// exactly data (its nonce is this request's), and the claim is ours. It
// asks the bucket's leader, which knows every acknowledged write.
func (s *Store) stored(ctx context.Context, id string, data []byte) (uint64, bool) {
	value, revision, found, err := s.ledger.LeaderKV(ctx, s.kv, id)
	if err != nil || !found || !bytes.Equal(value, data) {
		return 0, false
	}
	return revision, true
}

// errUnconfirmed means a key's record could not be confirmed with the
// bucket's leader (an election under way, a leader too busy to answer):
// the request is told to retry in a moment.
var errUnconfirmed = errors.New("idempotency record unconfirmed")

// read reads a key's record. A plain read, answered by any replica, is
// final when it shows an answer (a stored answer never changes) or
// another request's fingerprint. Anything else (running, released) is
// confirmed with the bucket's leader first: on a cluster a replica may not
// have applied an answer another instance already gave, and a retry there
// would be told the key is still running, or take it over.
func (s *Store) read(ctx context.Context, id, fingerprint string) (idemRecord, uint64, bool, error) {
	var cur idemRecord
	entry, err := s.kv.Get(ctx, id)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return cur, 0, false, err
	}
	if err == nil {
		if err := json.Unmarshal(entry.Value(), &cur); err != nil {
			return cur, 0, false, err
		}
		if cur.State == "done" || cur.Fingerprint != fingerprint {
			return cur, entry.Revision(), true, nil
		}
	}
	value, revision, found, err := s.ledger.LeaderKV(ctx, s.kv, id)
	if err != nil {
		return cur, 0, false, fmt.Errorf("%w: %w", errUnconfirmed, err)
	}
	if !found {
		return idemRecord{}, 0, false, nil
	}
	cur = idemRecord{}
	return cur, revision, true, json.Unmarshal(value, &cur)
}

// abandoned reports whether a running record's request can no longer
// finish: its lease ran out, or it belongs to an earlier boot of this very
// instance, which only runs one process at a time.
func (s *Store) abandoned(r idemRecord, now time.Time) bool {
	if now.After(r.LeaseUntil) {
		return true
	}
	return s.instance != "" && r.Instance == s.instance && r.Boot != s.boot
}

func retryAfter(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return d.Round(time.Second)
}

// Complete stores the request's answer under its key.
func (s *Store) Complete(ctx context.Context, c *Claim, fingerprint string, status int, body []byte) error {
	rec := idemRecord{State: "done", Fingerprint: fingerprint, Instance: s.instance, Boot: s.boot, Status: status, Body: s.seal.Seal(body, []byte(c.id)), CreatedAt: time.Now()}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.finish(ctx, c, data, "idempotency complete")
}

// Release lets the key run again after the request failed on our side. The
// record stays, marked released: a failure can come after the command's
// event was stored (the projections timed out, the client went away), so
// the retry takes the key over and first looks for that event instead of
// deciding afresh against a state that already holds it.
func (s *Store) Release(ctx context.Context, c *Claim, fingerprint string) error {
	rec := idemRecord{State: "released", Fingerprint: fingerprint, Instance: s.instance, Boot: s.boot, CreatedAt: time.Now()}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.finish(ctx, c, data, "idempotency release")
}

// finish writes a claim's last record, the answer or the release. A write
// that fails for a moment (an answer lost, no quorum while a cluster
// recovers) is tried again while ctx lasts, a few times: until it lands the
// key stays held, and every retry of the request is told to wait for the
// rest of the lease. A write refused because the record moved on (the key
// was taken over) is not.
func (s *Store) finish(ctx context.Context, c *Claim, data []byte, op string) error {
	for attempt := 1; ; attempt++ {
		_, err := s.kv.Update(ctx, c.id, data, c.rev)
		if err == nil {
			return nil
		}
		if _, ok := s.stored(ctx, c.id, data); ok {
			return nil
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt == finishAttempts {
			return eventlog.NATSErr(op, err)
		}
		if err := eventlog.Backoff(ctx, attempt+finishBackoff); err != nil {
			return eventlog.NATSErr(op, err)
		}
	}
}

// finishAttempts and finishBackoff: finish's waits start at 32 ms and
// double to 128 ms, about a second and a half in all.
const (
	finishAttempts = 12
	finishBackoff  = 5
)

// requestsBucket is the name of the bucket of Idempotency-Key records,
// without the environment.
const requestsBucket = "REQUESTS"

func recordID(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(sum[:])
}
