package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Operational records are what the service keeps beside the ledger to work
// fast and must not cost a synced write: Idempotency-Key records (a retry
// after a crash finds the effect in the ledger by its dedup id instead) and
// the vendor events already handled (a repeat changes nothing in the domain
// anyway). They live in KV buckets whose stream persists asynchronously on
// a single node: acknowledged once written to the file, synced in the
// background. On a cluster replication makes them durable (asynchronous
// persistence is only for unreplicated streams).

// OperationalBucket opens (creating as needed) a KV bucket of operational
// records, for the sibling packages that keep such records. legacy names the bucket the same records lived in before they
// left the synced path; its entries are copied over once and the old bucket
// removed, so an upgrade forgets no key.
func (l *Ledger) OperationalBucket(ctx context.Context, name, legacy, description string, ttl time.Duration) (jetstream.KeyValue, error) {
	name += "_" + strings.ToUpper(string(l.cfg.Env))
	l.bucketsMu.Lock()
	defer l.bucketsMu.Unlock()
	if kv, ok := l.buckets[name]; ok {
		return kv, nil
	}
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       description,
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		MaxAge:            ttl,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          l.cfg.Replicas,
		AllowRollup:       true,
		DenyDelete:        true,
		AllowDirect:       true,
	}
	if cfg.Replicas <= 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	kv, err := SetUp(ctx, "open bucket "+name, func(ctx context.Context) (jetstream.KeyValue, error) {
		if _, err := l.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return nil, err
		}
		return l.js.KeyValue(ctx, name)
	})
	if err != nil {
		return nil, err
	}
	if legacy != "" {
		if err := l.adopt(ctx, kv, legacy+"_"+strings.ToUpper(string(l.cfg.Env))); err != nil {
			return nil, err
		}
	}
	l.buckets[name] = kv
	return kv, nil
}

// adopt copies every entry of the legacy bucket into kv, then deletes the
// legacy bucket. Entries kv already has win.
func (l *Ledger) adopt(ctx context.Context, kv jetstream.KeyValue, legacy string) error {
	old, err := SetUp(ctx, "open bucket "+legacy, func(ctx context.Context) (jetstream.KeyValue, error) {
		old, err := l.js.KeyValue(ctx, legacy)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil
		}
		return old, err
	})
	if old == nil || err != nil {
		return err
	}
	keys, err := old.ListKeys(ctx)
	if err != nil {
		return NATSErr("list bucket "+legacy, err)
	}
	for k := range keys.Keys() {
		e, err := old.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return NATSErr("read bucket "+legacy, err)
		}
		if _, err := kv.Create(ctx, k, e.Value()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return NATSErr(fmt.Sprintf("copy %s", legacy), err)
		}
	}
	if err := l.js.DeleteKeyValue(ctx, legacy); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return NATSErr("delete bucket "+legacy, err)
	}
	return nil
}
