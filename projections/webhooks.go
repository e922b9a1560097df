package projections

import (
	"encoding/binary"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketEndpoints holds "<partner>/<endpoint id>" → WebhookEndpoint, for
	// the endpoints that exist. A deleted endpoint is removed.
	bucketEndpoints = bucket("webhook_endpoints")
	// bucketEndpointOrder holds "<partner>/<seq>" → endpoint id, listing a
	// partner's endpoints in creation order.
	bucketEndpointOrder = bucket("webhook_endpoint_order")
	// keyEndpointsChanged, in the meta bucket, holds the sequence of the
	// last endpoint creation, deletion, disabling, enabling, edit or
	// rotation.
	keyEndpointsChanged = []byte("webhook_endpoints_changed")
)

// WebhookEndpoint is an endpoint as the read model keeps it: the aggregate
// (with its secret still sealed) and the ledger sequence that created it,
// which is also its place in the partner's list.
type WebhookEndpoint struct {
	domain.WebhookEndpoint
	Seq uint64 `json:"seq"`
}

func init() {
	on("webhook_endpoint.created", func(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
		var ep WebhookEndpoint
		ep.Apply(ev)
		ep.Seq = rec.Seq
		if err := putJSON(tx.Bucket(bucketEndpoints), endpointKey(ev.PartnerID, ep.ID), ep); err != nil {
			return err
		}
		if err := tx.Bucket(bucketEndpointOrder).Put(orderKey(ev.PartnerID, u64(rec.Seq)), []byte(ep.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyEndpointsChanged, u64(rec.Seq))
	})
	// Disabling, enabling, edits and new secrets change the endpoint's
	// state in place; they count as changes of the set, so the dispatcher
	// looks again (and signs with the new secret, sends to the new address).
	for _, typ := range []string{
		"webhook_endpoint.disabled", "webhook_endpoint.paused", "webhook_endpoint.enabled",
		"webhook_endpoint.updated", "webhook_endpoint.secret_issued",
	} {
		on(typ, func(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
			ep, ok, err := changeEndpoint(tx, rec, ev)
			if err != nil || !ok {
				return err
			}
			ep.Apply(ev)
			return putJSON(tx.Bucket(bucketEndpoints), endpointKey(ev.PartnerID, ev.AggregateID), ep)
		})
	}
	on("webhook_endpoint.deleted", func(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
		ep, ok, err := changeEndpoint(tx, rec, ev)
		if err != nil || !ok {
			return err
		}
		if err := tx.Bucket(bucketEndpointOrder).Delete(orderKey(ev.PartnerID, u64(ep.Seq))); err != nil {
			return err
		}
		return tx.Bucket(bucketEndpoints).Delete(endpointKey(ev.PartnerID, ev.AggregateID))
	})
}

// changeEndpoint marks the set of endpoints changed at rec and loads the
// endpoint ev is about (ok is false if it is gone).
func changeEndpoint(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) (ep WebhookEndpoint, ok bool, err error) {
	if err := tx.Bucket(bucketMeta).Put(keyEndpointsChanged, u64(rec.Seq)); err != nil {
		return ep, false, err
	}
	ok, err = getJSON(tx.Bucket(bucketEndpoints), endpointKey(ev.PartnerID, ev.AggregateID), &ep)
	return ep, ok, err
}

// WebhookEndpoint returns one of the partner's endpoints. Another partner's
// endpoint, or a deleted one, is not found.
func (s *Store) WebhookEndpoint(partner, id string) (WebhookEndpoint, bool, error) {
	var (
		ep WebhookEndpoint
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bucketEndpoints), endpointKey(partner, id), &ep)
		return err
	})
	return ep, ok, err
}

// WebhookEndpoints lists the partner's endpoints in creation order, after
// position after (from the first when nil), at most limit of them (all when
// limit is 0), and reports whether more follow and the position of the last
// one returned.
func (s *Store) WebhookEndpoints(partner string, after []byte, limit int) (out []WebhookEndpoint, last []byte, more bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		endpoints := tx.Bucket(bucketEndpoints)
		out, last, more, err = page(tx.Bucket(bucketEndpointOrder).Cursor(), []byte(partner+"/"), after, limit, func(v []byte) (WebhookEndpoint, bool, error) {
			var ep WebhookEndpoint
			_, err := getJSON(endpoints, endpointKey(partner, string(v)), &ep)
			return ep, true, err
		})
		return err
	})
	return out, last, more, err
}

// WebhookEndpointsChanged is the sequence of the last endpoint creation,
// deletion, disabling or enabling applied, and the sequence of the last
// event applied, read together, so a reader can tell cheaply whether the
// set changed and up to where it did not.
func (s *Store) WebhookEndpointsChanged() (changed, applied uint64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyEndpointsChanged); len(v) == 8 {
			changed = binary.BigEndian.Uint64(v)
		}
		applied = readApplied(tx)
		return nil
	})
	return changed, applied, err
}

// AllWebhookEndpoints lists every existing endpoint of every partner, for the
// dispatcher to run a delivery worker per endpoint.
func (s *Store) AllWebhookEndpoints() ([]WebhookEndpoint, error) {
	out, _, err := s.AllWebhookEndpointsAt()
	return out, err
}

// AllWebhookEndpointsAt is AllWebhookEndpoints with the sequence of the last
// event applied, read together: the dispatcher's table of endpoints is a
// copy of the set as of that sequence.
func (s *Store) AllWebhookEndpointsAt() (out []WebhookEndpoint, applied uint64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		applied = readApplied(tx)
		return tx.Bucket(bucketEndpoints).ForEach(func(_, v []byte) error {
			var ep WebhookEndpoint
			if err := json.Unmarshal(v, &ep); err != nil {
				return err
			}
			out = append(out, ep)
			return nil
		})
	})
	return out, applied, err
}

func endpointKey(partner, id string) []byte { return []byte(partner + "/" + id) }
