package eventlogtest

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/idempotency"
)

// LoseKeyRecord deletes the record of an Idempotency-Key (scoped to the
// partner) from env's ledger at natsURL, as a crash of a single node can lose
// the newest records of the asynchronously persisted bucket. A retry with
// the key then finds no record and must recall its effect from the ledger.
func LoseKeyRecord(tb testing.TB, natsURL string, env domain.Environment, partner, key string) {
	tb.Helper()
	js, closeJS := connectJS(tb, natsURL)
	defer closeJS()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bucket, name := idempotency.KeyRecord(env, partner, key)
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		tb.Fatalf("open %s: %v", bucket, err)
	}
	if _, err := kv.Get(ctx, name); err != nil {
		tb.Fatalf("the key's record: %v", err)
	}
	if err := kv.Purge(ctx, name); err != nil {
		tb.Fatalf("lose the key's record: %v", err)
	}
}
