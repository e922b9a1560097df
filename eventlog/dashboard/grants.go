package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// Grants keeps the dashboard's sign-in links and sessions, each
// under the hash of its secret (the link's token, the session's cookie),
// never the secret itself. It is shared by every instance, so a link made
// on one opens on another and a session signed in on one is good on all.
// The bucket keeps nothing longer than a session lasts.
type Grants struct {
	kv jetstream.KeyValue
}

// ErrGrantUsed is a link that was already opened, or a session already
// signed out: a second use is refused.
var ErrGrantUsed = errors.New("dashboard grant already used")

// Open opens (creating as needed) the bucket of dashboard
// links and sessions. Unlike operational records, its writes are as
// durable as the ledger's: a link marked used must stay used after a crash,
// and sign-ins are too rare for the synced write to cost anything.
func Open(ctx context.Context, l *eventlog.Ledger) (*Grants, error) {
	kv, err := l.Bucket(ctx, jetstream.KeyValueConfig{
		Bucket:      "DASHBOARD",
		Description: "The partner dashboard's sign-in links and sessions, by the hash of their secret.",
		TTL:         domain.DashboardSessionTTL + domain.DashboardLinkTTL,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	return &Grants{kv: kv}, nil
}

// Put stores a new grant under hash.
func (d *Grants) Put(ctx context.Context, hash string, g domain.DashboardGrant) error {
	body, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if _, err := d.kv.Create(ctx, hash, body); err != nil {
		return eventlog.NATSErr("dashboard grant put", err)
	}
	return nil
}

// Get returns the grant stored under hash.
func (d *Grants) Get(ctx context.Context, hash string) (domain.DashboardGrant, bool, error) {
	g, _, ok, err := d.get(ctx, hash)
	return g, ok, err
}

func (d *Grants) get(ctx context.Context, hash string) (domain.DashboardGrant, uint64, bool, error) {
	e, err := d.kv.Get(ctx, hash)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return domain.DashboardGrant{}, 0, false, nil
	}
	if err != nil {
		return domain.DashboardGrant{}, 0, false, eventlog.NATSErr("dashboard grant get", err)
	}
	var g domain.DashboardGrant
	if err := json.Unmarshal(e.Value(), &g); err != nil {
		return domain.DashboardGrant{}, 0, false, fmt.Errorf("dashboard grant %s: %w", hash, err)
	}
	return g, e.Revision(), true, nil
}

// Use marks the grant under hash used, once: of two uses at the same time
// (two instances opening one link), exactly one succeeds and the other
// gets ErrGrantUsed. It returns the grant as it was before.
func (d *Grants) Use(ctx context.Context, hash string) (domain.DashboardGrant, bool, error) {
	g, rev, ok, err := d.get(ctx, hash)
	if err != nil || !ok {
		return g, ok, err
	}
	if g.Used {
		return g, true, ErrGrantUsed
	}
	used := g
	used.Used = true
	body, err := json.Marshal(used)
	if err != nil {
		return g, true, err
	}
	if _, err := d.kv.Update(ctx, hash, body, rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return g, true, ErrGrantUsed
		}
		return g, true, eventlog.NATSErr("dashboard grant use", err)
	}
	return g, true, nil
}
