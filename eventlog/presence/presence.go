package presence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// Presence counts the live instances sharing the ledger: each instance
// announces itself in a memory-backed KV bucket every beat, and an entry
// not renewed for three beats expires. Rules that split a budget between
// instances (the per-key rate limit) read the count, which is refreshed off
// the request path, so a request never waits for NATS to learn it.
type Presence struct {
	kv    jetstream.KeyValue
	key   string
	every time.Duration
	live  atomic.Int64
}

// Open opens the presence bucket for this instance; Run keeps it
// announced.
func Open(ctx context.Context, l *eventlog.Ledger, instance string, every time.Duration) (*Presence, error) {
	kv, err := l.Bucket(ctx, jetstream.KeyValueConfig{
		Bucket:      "INSTANCES",
		Description: "Live instances sharing the ledger.",
		TTL:         3 * every,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(instance))
	p := &Presence{kv: kv, key: hex.EncodeToString(sum[:8]), every: every}
	p.live.Store(1)
	return p, nil
}

// Live is the number of live instances, this one included, as of the last
// beat.
func (p *Presence) Live() int { return int(max(p.live.Load(), 1)) }

// Run announces this instance and recounts the others every beat until ctx
// ends, then withdraws the announcement.
func (p *Presence) Run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.beat(ctx)
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = p.kv.Delete(dctx, p.key)
			cancel()
			return
		case <-t.C:
		}
	}
}

func (p *Presence) beat(ctx context.Context) {
	if _, err := p.kv.Put(ctx, p.key, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return // the count stays as it was; the next beat tries again
	}
	keys, err := p.kv.ListKeys(ctx)
	if err != nil {
		return
	}
	n := int64(0)
	for range keys.Keys() {
		n++
	}
	p.live.Store(max(n, 1))
}
