package dispatcher

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// endpoints is this instance's table of every webhook endpoint, in memory:
// the fan-out reads an event's endpoints from it and every attempt its
// endpoint's address, state and opened secret, with no read of the
// projections file, no decoding and no unsealing per job.
//
// It is a copy of the projections' endpoints as of seen, the ledger sequence
// the projections had applied when it was last brought up to date (sync).
// The fan-out waits for the projections to apply a batch's events anyway (so
// that a partner who reads an event's resource here on receiving its webhook
// finds it), so the table follows them instead of reading the ledger a
// second time: after each batch the projector applies, one read of two
// sequences says whether an endpoint changed since seen, and only then is the
// set read again. An endpoint created just before an event is in the table
// once it reaches the event.
type endpoints struct {
	// syncMu lets one sync read the projections at a time.
	syncMu    sync.Mutex
	mu        sync.RWMutex
	seen      uint64
	loaded    bool
	byID      map[string]projections.WebhookEndpoint
	byPartner map[string][]projections.WebhookEndpoint
	// signers holds a signer by endpoint id, its secrets opened once. A
	// signer is dropped when its endpoint is deleted or its secrets change
	// (a rotation, a change of scheme); a rotated-out secret stops signing
	// at its expiry by itself (domain.WebhookSigner).
	signers map[string]keptSigner
	// okAt holds when this instance last saw an attempt to the endpoint
	// succeed (unix nanoseconds): successes are logged without waiting, so
	// the attempt log may not show the newest one yet when a failure reads it.
	okAt map[string]*atomic.Int64
}

func newEndpoints() *endpoints {
	return &endpoints{
		byID: map[string]projections.WebhookEndpoint{}, byPartner: map[string][]projections.WebhookEndpoint{},
		signers: map[string]keptSigner{}, okAt: map[string]*atomic.Int64{},
	}
}

// runEndpoints keeps the table up to date with the projections until ctx
// ends, whether or not the fan-out has events to wait for them: the queue's
// workers read an endpoint's state from it too.
func (d *Dispatcher) runEndpoints(ctx context.Context) {
	for ctx.Err() == nil {
		changed := d.store.Changed()
		if err := d.endpoints.sync(d.store); err != nil {
			d.log.Error().Err(err).Msg("webhook endpoint table not brought up to date; trying again")
			_ = eventlog.Sleep(ctx, time.Second)
			continue
		}
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
}

// sync brings the table up to the sequence the projections have applied,
// reading the endpoints again only when one changed since the table's copy.
func (t *endpoints) sync(store *projections.Store) error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	changed, applied, err := store.WebhookEndpointsChanged()
	if err != nil {
		return fmt.Errorf("endpoint table: %w", err)
	}
	t.mu.Lock()
	if t.loaded && changed <= t.seen {
		t.seen = max(t.seen, applied)
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	all, at, err := store.AllWebhookEndpointsAt()
	if err != nil {
		return fmt.Errorf("endpoint table: %w", err)
	}
	t.load(all, at)
	return nil
}

// load replaces the table with endpoints as of ledger sequence at, keeping
// the signers and last successes of the endpoints that remain.
func (t *endpoints) load(all []projections.WebhookEndpoint, at uint64) {
	byID := make(map[string]projections.WebhookEndpoint, len(all))
	byPartner := map[string][]projections.WebhookEndpoint{}
	for _, ep := range all {
		byID[ep.ID] = ep
		byPartner[ep.PartnerID] = append(byPartner[ep.PartnerID], ep)
	}
	for _, list := range byPartner {
		slices.SortFunc(list, func(a, b projections.WebhookEndpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID, t.byPartner, t.seen, t.loaded = byID, byPartner, at, true
	for id, kept := range t.signers {
		if ep, ok := byID[id]; !ok || !sameSecrets(kept.of, ep.WebhookEndpoint) {
			delete(t.signers, id)
		}
	}
	for id := range t.okAt {
		if _, ok := byID[id]; !ok {
			delete(t.okAt, id)
		}
	}
}

// ofPartner returns the partner's endpoints in creation order. The slice is
// replaced, never changed in place: read it, never change it.
func (t *endpoints) ofPartner(partner string) []projections.WebhookEndpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byPartner[partner]
}

// keptSigner is an endpoint's signer and the endpoint it was made from.
type keptSigner struct {
	sign domain.WebhookSigner
	of   domain.WebhookEndpoint
}

// sameSecrets reports whether two states of an endpoint sign alike.
func sameSecrets(a, b domain.WebhookEndpoint) bool {
	return bytes.Equal(a.SealedSecret, b.SealedSecret) && sameKey(a.SigningKey, b.SigningKey) &&
		(a.Previous == nil) == (b.Previous == nil) &&
		(a.Previous == nil || (bytes.Equal(a.Previous.SealedSecret, b.Previous.SealedSecret) && a.Previous.ExpiresAt.Equal(b.Previous.ExpiresAt)))
}

func sameKey(a, b *domain.SealedSigningKey) bool {
	return (a == nil) == (b == nil) && (a == nil || bytes.Equal(a.Sealed, b.Sealed))
}

// get returns one of the partner's endpoints, and its signer when its
// secrets were already opened.
func (t *endpoints) get(partner, id string) (ep projections.WebhookEndpoint, sign domain.WebhookSigner, signed, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ep, ok = t.byID[id]
	if !ok || ep.PartnerID != partner {
		return projections.WebhookEndpoint{}, sign, false, false
	}
	kept, signed := t.signers[id]
	return ep, kept.sign, signed, true
}

// keepSigner remembers an endpoint's signer, while it is in the table.
func (t *endpoints) keepSigner(ep projections.WebhookEndpoint, sign domain.WebhookSigner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byID[ep.ID]; ok {
		t.signers[ep.ID] = keptSigner{sign: sign, of: ep.WebhookEndpoint}
	}
}

// succeeded notes that an attempt to the endpoint made at succeeded.
func (t *endpoints) succeeded(id string, at time.Time) {
	t.mu.RLock()
	c := t.okAt[id]
	t.mu.RUnlock()
	if c == nil {
		t.mu.Lock()
		if c = t.okAt[id]; c == nil {
			c = new(atomic.Int64)
			t.okAt[id] = c
		}
		t.mu.Unlock()
	}
	for {
		old := c.Load()
		if at.UnixNano() <= old || c.CompareAndSwap(old, at.UnixNano()) {
			return
		}
	}
}

// lastSuccess is when this instance last saw an attempt to the endpoint
// succeed; zero when it has not.
func (t *endpoints) lastSuccess(id string) time.Time {
	t.mu.RLock()
	c := t.okAt[id]
	t.mu.RUnlock()
	if c == nil || c.Load() == 0 {
		return time.Time{}
	}
	return time.Unix(0, c.Load())
}
