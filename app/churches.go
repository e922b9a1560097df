package app

import (
	"context"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ImportChurches creates a batch of churches for the partner. A bad row is
// rejected on its own and never fails the batch; the results hold one
// outcome per row, in order. The one rule an import keeps across rows and
// batches is that external ids are unique within the partner, so an import
// that names one runs on the partner's catalogue (one aggregate: such
// imports and church changes take turns, however many run at once, on any
// instance), while an import without any stands on its own: it takes no
// turn and reads nothing before appending.
func (s *Service) ImportChurches(ctx context.Context, partner string, rows []domain.ImportRow) ([]domain.RowResult, error) {
	s = s.as("app.ImportChurches")
	var results []domain.RowResult
	cmd := eventlog.Command{
		Partner: partner, Aggregate: domain.ChurchCatalogue, LastOnly: true,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			// The catalogue is long: the rule reads the projections, once
			// they hold everything up to the catalogue's newest event.
			if err := s.waitApplied(ctx, h.Last); err != nil {
				return nil, err
			}
			used, lookupErr := s.externalIDLookup(partner)
			ev, res, err := domain.ImportChurches(partner, rows, used, time.Now())
			results = res
			if *lookupErr != nil {
				return nil, *lookupErr
			}
			return ev, err
		},
	}
	if !namesExternalID(rows) {
		cmd.LastOnly, cmd.Unordered = false, true
		cmd.Decide = func(context.Context, eventlog.History) (*domain.Event, error) {
			ev, res, err := domain.ImportChurches(partner, rows, nil, time.Now())
			results = res
			return ev, err
		}
	}
	out, err := s.runAnswered(ctx, cmd)
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

// namesExternalID reports whether any row of an import names an external
// id.
func namesExternalID(rows []domain.ImportRow) bool {
	for _, r := range rows {
		if r.ExternalID != nil {
			return true
		}
	}
	return false
}

// UpdateChurch renames a church or changes its external id under the
// import's rules. It runs on the partner's catalogue, like imports, so an
// external id stays unique however many changes run at once. Another
// partner's church is not found.
func (s *Service) UpdateChurch(ctx context.Context, partner, churchID string, p domain.ChurchPatch) (domain.Church, error) {
	s = s.as("app.UpdateChurch")
	return s.changeChurch(ctx, partner, churchID, func(c domain.Church, used func(string) bool) (*domain.Event, domain.Church, error) {
		return domain.UpdateChurch(partner, c, p, used, s.Now())
	})
}

// ArchiveChurch archives a church: it stays readable and keeps its
// enrollments, but takes no new donor sessions. Archiving an archived
// church changes nothing.
func (s *Service) ArchiveChurch(ctx context.Context, partner, churchID string) (domain.Church, error) {
	s = s.as("app.ArchiveChurch")
	return s.changeChurch(ctx, partner, churchID, func(c domain.Church, _ func(string) bool) (*domain.Event, domain.Church, error) {
		ev, next := domain.ArchiveChurch(partner, c, s.Now())
		return ev, next, nil
	})
}

// changeChurch runs one decision about one church on the partner's
// catalogue and answers the church as the projections then hold it.
func (s *Service) changeChurch(ctx context.Context, partner, churchID string,
	decide func(c domain.Church, externalIDUsed func(string) bool) (*domain.Event, domain.Church, error)) (domain.Church, error) {
	_, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: domain.ChurchCatalogue, LastOnly: true,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			if err := s.waitApplied(ctx, h.Last); err != nil {
				return nil, err
			}
			c, err := s.churchOf(partner, churchID)
			if err != nil {
				return nil, err
			}
			used, lookupErr := s.externalIDLookup(partner)
			ev, _, err := decide(c, used)
			if *lookupErr != nil {
				return nil, *lookupErr
			}
			return ev, err
		},
	})
	if err != nil {
		return domain.Church{}, err
	}
	return s.churchOf(partner, churchID)
}

// externalIDLookup is the uniqueness rule's view of the partner's external
// ids; a failed read is kept in the error it returns, for the command to
// fail with after deciding.
func (s *Service) externalIDLookup(partner string) (func(string) bool, *error) {
	var lookupErr error
	return func(ext string) bool {
		u, err := s.store.ExternalIDUsed(partner, ext)
		if err != nil {
			lookupErr = err
		}
		return u
	}, &lookupErr
}
