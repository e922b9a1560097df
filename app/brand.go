package app

import (
	"context"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ChangeBrand makes an operator's change to what donors see of a partner
// (partner.brand_changed, an internal event). It reports whether anything
// changed, and returns the brand as it is afterwards.
func (o *Operators) ChangeBrand(ctx context.Context, partnerID string, c domain.BrandChange) (domain.Brand, bool, error) {
	if !domain.ValidID(domain.PrefixPartner, partnerID) {
		return domain.Brand{}, false, domain.NotFound("partner", partnerID)
	}
	var (
		after   domain.Brand
		changed bool
	)
	_, err := o.ledger.Execute(ctx, eventlog.Command{
		Partner: partnerID, Aggregate: partnerID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.ChangeBrand(&p, c, time.Now())
			after, changed = p.Brand, ev != nil
			if changed {
				after = ev.Payload.(*domain.PartnerBrandChanged).Brand
			}
			return ev, err
		},
	})
	return after, changed, err
}

// Brand is what the session's flow pages show of its partner: its brand,
// the display name falling back to the partner's name.
func (s *Service) Brand(sess domain.Session) (domain.Brand, error) {
	p, ok, err := s.store.Partner(sess.PartnerID)
	if err != nil {
		return domain.Brand{}, err
	}
	if !ok {
		return domain.Brand{}, domain.NotFound("partner", sess.PartnerID)
	}
	b := p.Brand
	b.DisplayName = b.DisplayNameOr(p.Name)
	return b, nil
}
