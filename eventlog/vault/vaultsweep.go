package vault

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// The vault holds two kinds of entries, and the sweep looks at each once,
// when it is old enough to judge, and erases it if nothing refers to it:
//
//   - A phone key (phonekeys.go) that sealed no session: a crash after the
//     key was stored, or a session that failed after sealing. It holds no
//     phone, but the vault should keep only what something refers to. It is
//     judged once it has closed (no session sealed with it can still be
//     stored), from the sessions stored while it was open.
//   - A donor's own entry, written for a donor a session refers to: one moved
//     out of a phone key that is being erased (Vault.Erase), or, by builds
//     before sessions carried their phones, just before the session's event
//     was appended, where a crash in between left a phone no session refers
//     to. It is judged grace after it was stored.
//
// The sweep follows a durable consumer on the vault's stream, so it costs
// what is stored, not what the vault holds, and resumes where it stopped
// after a restart; every instance may run it.

// vaultSweeper is the durable name every instance shares.
const vaultSweeper = "vault_sweep"

// Refs says whether something refers to a vault entry.
type Refs struct {
	// Donor reports whether a session refers to the donor.
	Donor func(ctx context.Context, donorID string) (bool, error)
	// Key reports whether a session stored between from and to was sealed
	// with the phone key.
	Key func(ctx context.Context, key string, from, to time.Time) (bool, error)
}

// Sweep hands each entry stored from now on (and, the first time, each one
// already stored) to refs once it can be judged (a donor's own entry grace
// after it was stored, a phone key once it closed), and erases it when refs
// says nothing refers to it. It returns when ctx ends or the vault cannot
// be read.
func (v *Vault) Sweep(ctx context.Context, grace time.Duration, refs Refs) error {
	cons, err := eventlog.SetUp(ctx, "vault sweep", func(ctx context.Context) (jetstream.Consumer, error) {
		return v.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       vaultSweeper,
			Description:   "Erases stored phones and phone keys that no donor session refers to.",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       time.Minute,
			MaxAckPending: 1000,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	})
	if err != nil {
		return err
	}
	prefix := "$KV." + strings.TrimPrefix(v.stream.CachedInfo().Config.Name, "KV_") + "."
	return eventlog.ConsumeBatches(ctx, cons, 100, func(batch []jetstream.Msg) error {
		for _, m := range batch {
			if err := v.check(ctx, m, prefix, grace, refs); err != nil {
				return err
			}
		}
		return nil
	})
}

func (v *Vault) check(ctx context.Context, m jetstream.Msg, prefix string, grace time.Duration, refs Refs) error {
	if op := m.Headers().Get("KV-Operation"); op != "" {
		return m.Ack() // an erasure's marker, not an entry
	}
	meta, err := m.Metadata()
	if err != nil {
		return m.Term()
	}
	name := strings.TrimPrefix(m.Subject(), prefix)
	judgeAt := meta.Timestamp.Add(grace)
	referenced := func(ctx context.Context) (bool, error) { return refs.Donor(ctx, name) }
	if strings.HasPrefix(name, phoneKeyPrefix) {
		var entry phoneKeyEntry
		if err := json.Unmarshal(m.Data(), &entry); err != nil {
			return m.Term()
		}
		closes := entry.closes(meta.Timestamp)
		judgeAt = closes
		referenced = func(ctx context.Context) (bool, error) {
			from, to := sessionsSpan(meta.Timestamp, closes)
			return refs.Key(ctx, name, from, to)
		}
	}
	if wait := time.Until(judgeAt); wait > 0 {
		return m.NakWithDelay(wait)
	}
	ok, err := referenced(ctx)
	if err != nil {
		_ = m.NakWithDelay(time.Minute)
		return nil
	}
	if !ok {
		if err := forget(ctx, v.kv, v.stream, name); err != nil && err != ErrForgotten {
			_ = m.NakWithDelay(time.Minute)
			return nil
		}
	}
	return m.Ack()
}
