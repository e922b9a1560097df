package projections

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

var (
	// bucketChurches holds "<partner>/<church id>" → Church.
	bucketChurches = bucket("churches")
	// bucketChurchOrder holds "<partner>/<seq><row>" → church id, listing a
	// partner's churches in creation order: by the import's stream sequence,
	// then by row within the import.
	bucketChurchOrder = bucket("church_order")
	// bucketChurchExternal holds "<partner>\x00<external_id>" → church id.
	bucketChurchExternal = bucket("church_external_ids")
	// bucketChurchPartner holds church id → partner id, for vendor
	// webhooks, which name a church but not its partner.
	bucketChurchPartner = bucket("church_partner")
)

func init() {
	on("church.imported", func(tx *bolt.Tx, rec eventlog.Record, ev domain.Event) error {
		imp := ev.Payload.(*domain.ChurchesImported)
		churches, order, ext, owner := tx.Bucket(bucketChurches), tx.Bucket(bucketChurchOrder), tx.Bucket(bucketChurchExternal), tx.Bucket(bucketChurchPartner)
		for _, c := range imp.Created {
			ch := domain.Church{ID: c.ID, Name: c.Name, ExternalID: c.ExternalID, CreatedAt: ev.OccurredAt}
			if err := putJSON(churches, churchKey(ev.PartnerID, c.ID), ch); err != nil {
				return err
			}
			if err := order.Put(orderKey(ev.PartnerID, ChurchPosition(rec.Seq, c.Index)), []byte(c.ID)); err != nil {
				return err
			}
			if err := owner.Put([]byte(c.ID), []byte(ev.PartnerID)); err != nil {
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

func init() {
	on("church.updated", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		up := ev.Payload.(*domain.ChurchUpdated)
		return updateChurch(tx, ev.PartnerID, up.ChurchID, func(c *domain.Church) error {
			ext := tx.Bucket(bucketChurchExternal)
			if c.ExternalID != nil {
				if err := ext.Delete(externalKey(ev.PartnerID, *c.ExternalID)); err != nil {
					return err
				}
			}
			if up.ExternalID != nil {
				if err := ext.Put(externalKey(ev.PartnerID, *up.ExternalID), []byte(c.ID)); err != nil {
					return err
				}
			}
			c.Name, c.ExternalID = up.Name, up.ExternalID
			return nil
		})
	})
	on("church.archived", func(tx *bolt.Tx, _ eventlog.Record, ev domain.Event) error {
		return updateChurch(tx, ev.PartnerID, ev.Payload.(*domain.ChurchArchived).ChurchID, func(c *domain.Church) error {
			at := ev.OccurredAt
			c.ArchivedAt = &at
			return nil
		})
	})
}

// updateChurch loads one of the partner's churches, lets change alter it,
// and stores it again. A church the projections do not hold is left alone:
// the rule that appended the event read it from them.
func updateChurch(tx *bolt.Tx, partner, id string, change func(*domain.Church) error) error {
	churches := tx.Bucket(bucketChurches)
	var c domain.Church
	ok, err := getJSON(churches, churchKey(partner, id), &c)
	if err != nil || !ok {
		return err
	}
	if err := change(&c); err != nil {
		return err
	}
	return putJSON(churches, churchKey(partner, id), c)
}

func churchKey(partner, church string) []byte { return []byte(partner + "/" + church) }

func externalKey(partner, ext string) []byte { return []byte(partner + "\x00" + ext) }

// ChurchPosition is a church's place in its partner's list: the import's
// stream sequence and the row's index. Lists page by position.
func ChurchPosition(seq uint64, index int) []byte {
	pos := make([]byte, 12)
	binary.BigEndian.PutUint64(pos, seq)
	binary.BigEndian.PutUint32(pos[8:], uint32(index))
	return pos
}

func orderKey(partner string, pos []byte) []byte { return append([]byte(partner+"/"), pos...) }

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
// position after (from the first when nil), and reports whether more follow
// and the position of the last one returned.
func (s *Store) Churches(partner string, after []byte, limit int) (out []domain.Church, last []byte, more bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		churches := tx.Bucket(bucketChurches)
		out, last, more, err = page(tx.Bucket(bucketChurchOrder).Cursor(), []byte(partner+"/"), after, limit, func(v []byte) (domain.Church, bool, error) {
			var ch domain.Church
			_, err := getJSON(churches, churchKey(partner, string(v)), &ch)
			return ch, true, err
		})
		return err
	})
	return out, last, more, err
}

// ChurchPartner returns the partner a church belongs to.
func (s *Store) ChurchPartner(churchID string) (string, bool, error) {
	var partner string
	err := s.view(func(tx *bolt.Tx) error {
		partner = string(tx.Bucket(bucketChurchPartner).Get([]byte(churchID)))
		return nil
	})
	return partner, partner != "", err
}
