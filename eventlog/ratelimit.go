package eventlog

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RateLimits is the shared state of per-key rate limits: a GCRA "theoretical
// arrival time" per key in a memory-backed KV bucket. Every instance reads
// and swaps the same values, so a key's budget is one budget however many
// instances serve it. Losing it on a restart only forgives some requests.
//
// It implements throttled's GCRAStoreCtx.
type RateLimits struct {
	kv jetstream.KeyValue
}

// OpenRateLimits opens the rate-limit bucket.
func (l *Ledger) OpenRateLimits(ctx context.Context) (*RateLimits, error) {
	kv, err := l.bucket(ctx, jetstream.KeyValueConfig{
		Bucket:      "RATELIMIT",
		Description: "Per API key token-bucket state.",
		TTL:         time.Hour,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return nil, err
	}
	return &RateLimits{kv: kv}, nil
}

// GetWithTime returns the stored value for key, or -1, and the current time.
func (r *RateLimits) GetWithTime(ctx context.Context, key string) (int64, time.Time, error) {
	now := time.Now()
	entry, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return -1, now, nil
	}
	if err != nil {
		return 0, now, natsErr("rate limit get", err)
	}
	v, err := strconv.ParseInt(string(entry.Value()), 10, 64)
	if err != nil {
		return 0, now, natsErr("rate limit get", err)
	}
	return v, now, nil
}

// SetIfNotExistsWithTTL sets key to value when it has no value yet.
func (r *RateLimits) SetIfNotExistsWithTTL(ctx context.Context, key string, value int64, _ time.Duration) (bool, error) {
	_, err := r.kv.Create(ctx, key, []byte(strconv.FormatInt(value, 10)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, natsErr("rate limit set", err)
	}
	return true, nil
}

// CompareAndSwapWithTTL sets key to new if it still holds old.
func (r *RateLimits) CompareAndSwapWithTTL(ctx context.Context, key string, old, new int64, _ time.Duration) (bool, error) {
	entry, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, natsErr("rate limit swap", err)
	}
	if string(entry.Value()) != strconv.FormatInt(old, 10) {
		return false, nil
	}
	_, err = r.kv.Update(ctx, key, []byte(strconv.FormatInt(new, 10)), entry.Revision())
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, natsErr("rate limit swap", err)
	}
	return true, nil
}
