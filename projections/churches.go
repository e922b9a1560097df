package projections

import (
	"bytes"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketChurches holds "<partner>/<church id>" → Church. Church ids are
	// KSUIDs, so a partner's churches list in creation order.
	bucketChurches = bucket("churches")
	// bucketChurchExternal holds "<partner>\x00<external_id>" → church id.
	bucketChurchExternal = bucket("church_external_ids")
)

func init() {
	on("church.imported", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		imp := ev.Payload.(*domain.ChurchesImported)
		churches, ext := tx.Bucket(bucketChurches), tx.Bucket(bucketChurchExternal)
		for _, c := range imp.Created {
			ch := domain.Church{ID: c.ID, Name: c.Name, ExternalID: c.ExternalID, CreatedAt: ev.OccurredAt}
			if err := putJSON(churches, churchKey(ev.PartnerID, c.ID), ch); err != nil {
				return err
			}
			if c.ExternalID != nil {
				if err := ext.Put(externalKey(ev.PartnerID, *c.ExternalID), []byte(c.ID)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func churchKey(partner, church string) []byte { return []byte(partner + "/" + church) }

func externalKey(partner, ext string) []byte { return []byte(partner + "\x00" + ext) }

// Church returns one of the partner's churches. Another partner's church is
// not found, the same as a church that does not exist.
func (s *Store) Church(partner, id string) (domain.Church, bool, error) {
	var (
		c  domain.Church
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bucketChurches), churchKey(partner, id), &c)
		return err
	})
	return c, ok, err
}

// ExternalIDUsed reports whether the partner has a church with external id ext.
func (s *Store) ExternalIDUsed(partner, ext string) (bool, error) {
	var used bool
	err := s.view(func(tx *bolt.Tx) error {
		used = tx.Bucket(bucketChurchExternal).Get(externalKey(partner, ext)) != nil
		return nil
	})
	return used, err
}

// Churches lists the partner's churches in creation order, starting after
// the church id after (or from the first when empty), and reports whether
// more follow.
func (s *Store) Churches(partner, after string, limit int) ([]domain.Church, bool, error) {
	var (
		out  []domain.Church
		more bool
	)
	prefix := []byte(partner + "/")
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChurches).Cursor()
		k, v := c.Seek(prefix)
		if after != "" {
			k, v = c.Seek(churchKey(partner, after))
			if bytes.Equal(k, churchKey(partner, after)) {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(out) == limit {
				more = true
				return nil
			}
			var ch domain.Church
			if err := json.Unmarshal(v, &ch); err != nil {
				return err
			}
			out = append(out, ch)
		}
		return nil
	})
	return out, more, err
}
