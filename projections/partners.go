package projections

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	bucketPartners    = bucket("partners")
	bucketKeyHashes   = bucket("key_hashes")
	bucketKeyPrefixes = bucket("key_prefixes")
)

// Principal is who an API key belongs to.
type Principal struct {
	PartnerID   string             `json:"partner_id"`
	KeyID       string             `json:"key_id"`
	KeyPrefix   string             `json:"key_prefix"`
	Environment domain.Environment `json:"environment"`
	Revoked     bool               `json:"revoked"`
	// ExpiresAt is when a rolled key stops working; nil until it is rolled.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Live reports whether the key works at now.
func (p Principal) Live(now time.Time) bool {
	return !p.Revoked && (p.ExpiresAt == nil || now.Before(*p.ExpiresAt))
}

func init() {
	on("partner.created", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		return updatePartner(tx, ev)
	})
	on("partner.brand_changed", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		return updatePartner(tx, ev)
	})
	on("partner.key_issued", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		k := ev.Payload.(*domain.KeyIssued)
		return issueKey(tx, ev, k.KeyID, k.Prefix, k.Hash)
	})
	on("partner.key_rolled", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		k := ev.Payload.(*domain.KeyRolled)
		if err := issueKey(tx, ev, k.KeyID, k.Prefix, k.Hash); err != nil {
			return err
		}
		expires := k.PreviousExpiresAt
		return changeKey(tx, ev.PartnerID, k.PreviousKeyID, func(pr *Principal) { pr.ExpiresAt = &expires })
	})
	on("partner.key_revoked", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		if err := updatePartner(tx, ev); err != nil {
			return err
		}
		return changeKey(tx, ev.PartnerID, ev.Payload.(*domain.KeyRevoked).KeyID, func(pr *Principal) { pr.Revoked = true })
	})
}

// issueKey folds ev into the partner and adds the new key's principal.
func issueKey(tx *bolt.Tx, ev domain.Event, keyID, prefix, hash string) error {
	if err := updatePartner(tx, ev); err != nil {
		return err
	}
	p, _, err := loadPartner(tx, ev.PartnerID)
	if err != nil {
		return err
	}
	pr := Principal{PartnerID: ev.PartnerID, KeyID: keyID, KeyPrefix: prefix, Environment: p.Environment}
	if err := putJSON(tx.Bucket(bucketKeyHashes), []byte(hash), pr); err != nil {
		return err
	}
	return tx.Bucket(bucketKeyPrefixes).Put([]byte(prefix), []byte(hash))
}

// changeKey changes the principal of one of the partner's keys (the
// partner already holds the event).
func changeKey(tx *bolt.Tx, partner, keyID string, change func(*Principal)) error {
	p, _, err := loadPartner(tx, partner)
	if err != nil {
		return err
	}
	for _, k := range p.Keys {
		if k.ID != keyID {
			continue
		}
		b := tx.Bucket(bucketKeyHashes)
		var pr Principal
		if ok, err := getJSON(b, []byte(k.Hash), &pr); err != nil || !ok {
			return err
		}
		change(&pr)
		return putJSON(b, []byte(k.Hash), pr)
	}
	return nil
}

// updatePartner folds ev into the stored partner aggregate.
func updatePartner(tx *bolt.Tx, ev domain.Event) error {
	p, _, err := loadPartner(tx, ev.PartnerID)
	if err != nil {
		return err
	}
	p.Apply(ev)
	return putJSON(tx.Bucket(bucketPartners), []byte(ev.PartnerID), p)
}

func loadPartner(tx *bolt.Tx, id string) (domain.Partner, bool, error) {
	var p domain.Partner
	ok, err := getJSON(tx.Bucket(bucketPartners), []byte(id), &p)
	return p, ok, err
}

// Partner returns a partner by id.
func (s *Store) Partner(id string) (domain.Partner, bool, error) {
	var (
		p  domain.Partner
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		p, ok, err = loadPartner(tx, id)
		return err
	})
	return p, ok, err
}

// KeyByHash returns the principal of the key with this SHA-256 hash.
func (s *Store) KeyByHash(hash string) (Principal, bool, error) {
	var (
		pr Principal
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bucketKeyHashes), []byte(hash), &pr)
		return err
	})
	return pr, ok, err
}

// KeyByPrefix returns the principal of the key shown as prefix.
func (s *Store) KeyByPrefix(prefix string) (Principal, bool, error) {
	var (
		pr Principal
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		hash := tx.Bucket(bucketKeyPrefixes).Get([]byte(prefix))
		if hash == nil {
			return nil
		}
		var err error
		ok, err = getJSON(tx.Bucket(bucketKeyHashes), hash, &pr)
		return err
	})
	return pr, ok, err
}
