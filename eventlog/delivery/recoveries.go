package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// Recoveries keeps webhook recoveries (domain.WebhookRecovery) in a KV
// bucket of the environment, one key per recovery, with their progress, so
// that a recovery resumes after a restart, on whichever instance, from the
// last event it sent. Every change is a compare-and-set on the key's
// revision: an instance whose lease was taken over cannot write over the
// new owner's progress. Unlike the other operational buckets it is not
// persisted asynchronously: a 202 answered for a recovery must survive a
// crash. A recovery is kept for MaxRecoveryAge after its last change.
type Recoveries struct {
	kv jetstream.KeyValue
}

// ErrRecoveryMoved means a recovery was changed by another instance since
// it was read: its lease was taken over.
var ErrRecoveryMoved = errors.New("recovery changed by another instance")

// OpenRecoveries opens (creating as needed) the recoveries bucket.
func OpenRecoveries(ctx context.Context, l *eventlog.Ledger) (*Recoveries, error) {
	name := "WEBHOOK_RECOVERIES_" + strings.ToUpper(string(l.Env()))
	kv, err := eventlog.SetUp(ctx, "open bucket "+name, func(ctx context.Context) (jetstream.KeyValue, error) {
		return l.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "Webhook recoveries and their progress (" + string(l.Env()) + ").",
			History:     1,
			TTL:         domain.MaxRecoveryAge,
			Storage:     jetstream.FileStorage,
			Replicas:    l.Replicas(),
		})
	})
	if err != nil {
		return nil, err
	}
	return &Recoveries{kv: kv}, nil
}

// Recovery is a stored recovery and its revision, for Update.
type Recovery struct {
	domain.WebhookRecovery
	Revision uint64
}

func recoveryKey(partner, id string) (string, error) {
	if !eventlog.SafeToken(partner) || !eventlog.SafeToken(id) {
		return "", fmt.Errorf("recoveries: unsafe partner %q or id %q", partner, id)
	}
	return partner + "." + id, nil
}

// Create stores a new recovery.
func (r *Recoveries) Create(ctx context.Context, rec domain.WebhookRecovery) (Recovery, error) {
	key, err := recoveryKey(rec.PartnerID, rec.ID)
	if err != nil {
		return Recovery{}, err
	}
	data, _ := json.Marshal(rec)
	// The marker first: a recovery without one would never be run, a
	// marker without a recovery is dropped by Running.
	if rec.Status == domain.RecoveryRunning {
		if _, err := r.kv.Put(ctx, runningPrefix+key, nil); err != nil {
			return Recovery{}, eventlog.NATSErr("recovery "+key, err)
		}
	}
	rev, err := r.kv.Create(ctx, key, data)
	if err != nil {
		return Recovery{}, eventlog.NATSErr("recovery "+key, err)
	}
	return Recovery{WebhookRecovery: rec, Revision: rev}, nil
}

// runningPrefix marks the keys of running recoveries, so that the runners
// list those and not every recovery of the last 30 days.
const runningPrefix = "running."

// Get returns one of the partner's recoveries.
func (r *Recoveries) Get(ctx context.Context, partner, id string) (Recovery, bool, error) {
	key, err := recoveryKey(partner, id)
	if err != nil {
		return Recovery{}, false, err
	}
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Recovery{}, false, nil
	}
	if err != nil {
		return Recovery{}, false, eventlog.NATSErr("recovery "+key, err)
	}
	var rec domain.WebhookRecovery
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return Recovery{}, false, fmt.Errorf("recovery %s: %w", key, err)
	}
	return Recovery{WebhookRecovery: rec, Revision: e.Revision()}, true, nil
}

// Update stores rec if nobody changed it since it was read, and returns it
// with its new revision; ErrRecoveryMoved if somebody did.
func (r *Recoveries) Update(ctx context.Context, rec Recovery) (Recovery, error) {
	key, err := recoveryKey(rec.PartnerID, rec.ID)
	if err != nil {
		return rec, err
	}
	rec.UpdatedAt = time.Now().UTC()
	data, _ := json.Marshal(rec.WebhookRecovery)
	rev, err := r.kv.Update(ctx, key, data, rec.Revision)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return rec, fmt.Errorf("recovery %s: %w", key, ErrRecoveryMoved)
	}
	if err != nil {
		return rec, eventlog.NATSErr("recovery "+key, err)
	}
	rec.Revision = rev
	if rec.Status != domain.RecoveryRunning {
		if err := r.kv.Delete(ctx, runningPrefix+key); err != nil {
			return rec, eventlog.NATSErr("recovery "+key, err)
		}
	}
	return rec, nil
}

// Running lists the recoveries still running, of every partner.
func (r *Recoveries) Running(ctx context.Context) ([]Recovery, error) {
	keys, err := r.kv.ListKeysFiltered(ctx, runningPrefix+">")
	if err != nil {
		return nil, eventlog.NATSErr("list recoveries", err)
	}
	var out []Recovery
	for k := range keys.Keys() {
		partner, id, _ := strings.Cut(strings.TrimPrefix(k, runningPrefix), ".")
		rec, ok, err := r.Get(ctx, partner, id)
		if err != nil {
			return nil, err
		}
		if ok && rec.Status == domain.RecoveryRunning {
			out = append(out, rec)
			continue
		}
		// Finished (or expired) and its marker left by a crash.
		if err := r.kv.Delete(ctx, k); err != nil {
			return nil, eventlog.NATSErr("recovery "+k, err)
		}
	}
	return out, nil
}
