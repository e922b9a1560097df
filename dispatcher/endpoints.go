package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
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
// It starts from the projections (endpoints and checkpoint read together)
// and then follows the ledger itself, folding in each webhook_endpoint event
// the way the read model does. seen is the ledger sequence it reflects: the
// fan-out waits until seen reaches an event before it looks up the event's
// endpoints, so an endpoint created just before an event gets it. Following
// the ledger directly, rather than waiting for the projector, keeps a
// delivery's first attempt off the projector's path (its decoding and its
// synced commits): the table follows at the speed of a raw read.
type endpoints struct {
	mu        sync.RWMutex
	seen      uint64
	changed   chan struct{}
	byID      map[string]projections.WebhookEndpoint
	byPartner map[string][]projections.WebhookEndpoint
	// signers holds a signer by endpoint id, its secret opened once; an
	// endpoint's secret never changes, and a deleted endpoint's is dropped.
	signers map[string]domain.WebhookSigner
	// okAt holds when this instance last saw an attempt to the endpoint
	// succeed (unix nanoseconds): successes are logged without waiting, so
	// the attempt log may not show the newest one yet when a failure reads it.
	okAt map[string]*atomic.Int64
}

func newEndpoints() *endpoints {
	return &endpoints{
		changed: make(chan struct{}), byID: map[string]projections.WebhookEndpoint{},
		byPartner: map[string][]projections.WebhookEndpoint{}, signers: map[string]domain.WebhookSigner{}, okAt: map[string]*atomic.Int64{},
	}
}

// endpointsBatch bounds the ledger records the table folds in at once.
const endpointsBatch = 1000

// runEndpoints loads the table and keeps it following the ledger until ctx
// ends, starting again from the projections after an error.
func (d *Dispatcher) runEndpoints(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.followEndpoints(ctx); err != nil && ctx.Err() == nil {
			d.log.Error().Err(err).Msg("webhook endpoint table stopped; restarting")
			pause(ctx, time.Second)
		}
	}
}

func (d *Dispatcher) followEndpoints(ctx context.Context) error {
	t := d.endpoints
	t.mu.RLock()
	from := t.seen
	t.mu.RUnlock()
	if from == 0 {
		all, applied, err := d.store.AllWebhookEndpointsAt()
		if err != nil {
			return fmt.Errorf("endpoint table: %w", err)
		}
		t.load(all, applied)
		from = applied
	}
	return d.ledger.Follow(ctx, from+1, endpointsBatch, func(recs []eventlog.Record) error {
		return t.fold(recs)
	})
}

// load replaces the table with endpoints as of ledger sequence at.
func (t *endpoints) load(all []projections.WebhookEndpoint, at uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID = make(map[string]projections.WebhookEndpoint, len(all))
	for _, ep := range all {
		t.byID[ep.ID] = ep
	}
	t.byPartner = map[string][]projections.WebhookEndpoint{}
	for _, ep := range all {
		t.index(ep.PartnerID)
	}
	t.advance(at)
}

// fold applies a batch of ledger records, in order, and moves seen past
// them. Records it already reflects are skipped.
func (t *endpoints) fold(recs []eventlog.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rec := range recs {
		if rec.Seq <= t.seen || !strings.HasPrefix(rec.Type, "webhook_endpoint.") {
			continue
		}
		ev, err := rec.Event()
		if err != nil {
			return fmt.Errorf("endpoint table: %w", err)
		}
		if projections.ApplyWebhookEndpointEvent(t.byID, rec, ev) {
			if ev.Type == "webhook_endpoint.deleted" {
				delete(t.signers, ev.AggregateID)
				delete(t.okAt, ev.AggregateID)
			}
			t.index(rec.Partner)
		}
	}
	t.advance(recs[len(recs)-1].Seq)
	return nil
}

// index rebuilds one partner's list, in creation order. Endpoint events are
// rare; the list is replaced, never changed in place, so readers keep
// theirs without a lock.
func (t *endpoints) index(partner string) {
	var list []projections.WebhookEndpoint
	for _, ep := range t.byID {
		if ep.PartnerID == partner {
			list = append(list, ep)
		}
	}
	slices.SortFunc(list, func(a, b projections.WebhookEndpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(list) == 0 {
		delete(t.byPartner, partner)
		return
	}
	t.byPartner[partner] = list
}

func (t *endpoints) advance(seq uint64) {
	if seq <= t.seen {
		return
	}
	t.seen = seq
	close(t.changed)
	t.changed = make(chan struct{})
}

// waitFor blocks until the table reflects the ledger up to seq.
func (t *endpoints) waitFor(ctx context.Context, seq uint64) error {
	for {
		t.mu.RLock()
		seen, changed := t.seen, t.changed
		t.mu.RUnlock()
		if seen >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("endpoint table: waiting for sequence %d (at %d): %w", seq, seen, ctx.Err())
		case <-changed:
		}
	}
}

// ofPartner returns the partner's endpoints in creation order. The slice is
// shared: read it, never change it.
func (t *endpoints) ofPartner(partner string) []projections.WebhookEndpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byPartner[partner]
}

// get returns one of the partner's endpoints, and its signer when its
// secret was already opened.
func (t *endpoints) get(partner, id string) (ep projections.WebhookEndpoint, sign domain.WebhookSigner, signed, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ep, ok = t.byID[id]
	if !ok || ep.PartnerID != partner {
		return projections.WebhookEndpoint{}, sign, false, false
	}
	sign, signed = t.signers[id]
	return ep, sign, signed, true
}

// keepSigner remembers an endpoint's signer, while it is in the table.
func (t *endpoints) keepSigner(id string, sign domain.WebhookSigner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byID[id]; ok {
		t.signers[id] = sign
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
