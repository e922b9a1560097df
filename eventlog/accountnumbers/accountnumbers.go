package accountnumbers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// Index maps a bank's account number id to the church it was opened for.
type Index struct {
	kv jetstream.KeyValue
}

// Open opens (creating as needed) the index of the environment's ledger.
func Open(ctx context.Context, l *eventlog.Ledger) (*Index, error) {
	kv, err := l.Bucket(ctx, jetstream.KeyValueConfig{
		Bucket:      "ACCOUNT_NUMBERS",
		Description: "The church each bank account number id was opened for.",
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	return &Index{kv: kv}, nil
}

// ErrTaken means the account number id is already recorded for another
// church: the bank handed out one account number twice, or two setups
// share a bank account and an index.
var ErrTaken = errors.New("account number id is recorded for another church")

// Put records that accountNumberID belongs to churchID. Recording the same
// pair again is a no-op, so a retried setup may call it any number of
// times; a different church for a recorded id is ErrTaken.
func (x *Index) Put(ctx context.Context, accountNumberID, churchID string) error {
	key := indexKey(accountNumberID)
	_, err := x.kv.Create(ctx, key, []byte(churchID))
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return eventlog.NATSErr("account number index", err)
	}
	have, ok, err := x.Church(ctx, accountNumberID)
	switch {
	case err != nil:
		return err
	case !ok || have != churchID:
		return fmt.Errorf("account number %s: %w", accountNumberID, ErrTaken)
	}
	return nil
}

// Church returns the church accountNumberID was opened for; ok is false
// when the index does not know it.
func (x *Index) Church(ctx context.Context, accountNumberID string) (churchID string, ok bool, err error) {
	e, err := x.kv.Get(ctx, indexKey(accountNumberID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, eventlog.NATSErr("account number index", err)
	}
	return string(e.Value()), true, nil
}

// indexKey maps any id to a valid KV key: the bank's ids are its own, and
// a key must not hold what a KV key cannot.
func indexKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
