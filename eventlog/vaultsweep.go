package eventlog

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A donor's own vault entry is written for a donor a session refers to:
// one moved out of a phone key that is being erased (Vault.Erase), or, by
// builds before sessions carried their phones, just before the session's
// event was appended, where a crash in between left a phone that no
// session refers to. The sweep looks at each stored phone once, when it is
// old enough that its session would long be in the ledger, and erases it if
// no session refers to it. Phone keys are not phones: a key no session used
// (a crash after it was made) seals nothing, and the sweep leaves keys be. It follows a durable consumer on the vault's
// stream, so it costs what is stored, not what the vault holds, and resumes
// where it stopped after a restart; every instance may run it.

// vaultSweeper is the durable name every instance shares.
const vaultSweeper = "vault_sweep"

// Sweep hands each phone stored from now on (and, the first time, each one
// already stored) to referenced once it is grace old, and erases it when
// referenced says no session refers to it. It returns when ctx ends or the
// vault cannot be read.
func (v *Vault) Sweep(ctx context.Context, grace time.Duration, referenced func(ctx context.Context, donorID string) (bool, error)) error {
	cons, err := setUp(ctx, "vault sweep", func(ctx context.Context) (jetstream.Consumer, error) {
		return v.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       vaultSweeper,
			Description:   "Erases stored phones that no donor session refers to.",
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
	return consumeBatches(ctx, cons, 100, 0, &settling{release: nak}, func(batch []jetstream.Msg) error {
		for _, m := range batch {
			if err := v.check(ctx, m, prefix, grace, referenced); err != nil {
				return err
			}
		}
		return nil
	})
}

func (v *Vault) check(ctx context.Context, m jetstream.Msg, prefix string, grace time.Duration, referenced func(context.Context, string) (bool, error)) error {
	if op := m.Headers().Get("KV-Operation"); op != "" {
		return m.Ack() // an erasure's marker, not a phone
	}
	donor := strings.TrimPrefix(m.Subject(), prefix)
	if strings.HasPrefix(donor, phoneKeyPrefix) {
		return m.Ack()
	}
	meta, err := m.Metadata()
	if err != nil {
		return m.Term()
	}
	if age := time.Since(meta.Timestamp); age < grace {
		return m.NakWithDelay(grace - age)
	}
	ok, err := referenced(ctx, donor)
	if err != nil {
		_ = m.NakWithDelay(time.Minute)
		return nil
	}
	if !ok {
		if err := forget(ctx, v.kv, v.stream, donor); err != nil && err != ErrForgotten {
			_ = m.NakWithDelay(time.Minute)
			return nil
		}
	}
	return m.Ack()
}
