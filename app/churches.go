package app

import (
	"time"

	"context"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ImportChurches creates a batch of churches for the partner. A bad row is
// rejected on its own and never fails the batch; the results hold one
// outcome per row, in order. Imports of one partner are one aggregate (its
// catalogue), so external ids are unique however many run at once.
func (s *Service) ImportChurches(ctx context.Context, partner string, rows []domain.ImportRow) ([]domain.RowResult, error) {
	var results []domain.RowResult
	out, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: domain.ChurchCatalogue, LastOnly: true,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			// The catalogue is long: the rule reads the projections, once
			// they hold everything up to the catalogue's newest event.
			if err := s.waitApplied(ctx, h.Last); err != nil {
				return nil, err
			}
			var lookupErr error
			used := func(ext string) bool {
				u, err := s.store.ExternalIDUsed(partner, ext)
				if err != nil {
					lookupErr = err
				}
				return u
			}
			ev, res, err := domain.ImportChurches(partner, rows, used, time.Now())
			results = res
			if lookupErr != nil {
				return nil, lookupErr
			}
			return ev, err
		},
	})
	if err != nil {
		return nil, err
	}
	if out.Replayed {
		// The import ran before (a retry after a crash): answer with what
		// it decided then.
		ev, err := out.Record.Event()
		if err != nil {
			return nil, err
		}
		results = ev.Payload.(*domain.ChurchesImported).Results(ev.OccurredAt)
	}
	return results, nil
}
