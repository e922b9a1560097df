package eventlogtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
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
	bucket, name := KeyRecord(env, partner, key)
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

// KeyRecord names where eventlog/idempotency keeps the record of key
// (scoped to scope, the partner) on env's ledger: the environment's
// REQUESTS bucket, under the SHA-256 of the scope and the key.
func KeyRecord(env domain.Environment, scope, key string) (bucket, name string) {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return "REQUESTS_" + strings.ToUpper(string(env)), hex.EncodeToString(sum[:])
}
