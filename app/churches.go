package app

import (
	"context"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/reservations"
)

// ImportChurches creates a batch of churches for the partner. A bad row is
// rejected on its own and never fails the batch; the results hold one
// outcome per row, in order. The one rule an import keeps across rows and
// batches is that external ids are unique within the partner: the import
// reserves each external id it would store (externalids.go), and its
// event stands on its own, so it takes no turn on the partner's catalogue
// and reads nothing of the ledger before appending; imports naming no
// external id reserve nothing.
func (s *Service) ImportChurches(ctx context.Context, partner string, rows []domain.ImportRow) ([]domain.RowResult, error) {
	s = s.as("app.ImportChurches")
	cmd := eventlog.Command{Partner: partner, Aggregate: domain.ChurchCatalogue, Unordered: true}
	ids, err := s.reserveImported(ctx, &cmd, rows)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ids.appendBy(ctx)
	defer cancel()
	var results []domain.RowResult
	cmd.Decide = func(context.Context, eventlog.History) (*domain.Event, error) {
		ev, res, err := domain.ImportChurches(partner, rows, ids.used, time.Now())
		results = res
		return ev, err
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

// reserveImported reserves the external ids an import would store: those
// of its rows that pass every other check and that no church of the
// partner holds, as this instance's projections stand (the reservation
// settles the rest; asking the projections first also covers churches no
// reservation was ever made for, stored before reservations were).
func (s *Service) reserveImported(ctx context.Context, cmd *eventlog.Command, rows []domain.ImportRow) (heldIDs, error) {
	used, lookupErr := s.externalIDLookup(cmd.Partner)
	_, res, err := domain.ImportChurches(cmd.Partner, rows, used, time.Now())
	if *lookupErr != nil {
		return heldIDs{}, *lookupErr
	}
	if err != nil {
		return heldIDs{}, err
	}
	var exts []string
	for _, r := range res {
		if r.Church != nil && r.Church.ExternalID != nil {
			exts = append(exts, *r.Church.ExternalID)
		}
	}
	return s.reserveExternalIDs(ctx, cmd, exts)
}

// UpdateChurch renames a church or changes its external id under the
// import's rules: a new external id is reserved as an import's are, and
// the one it replaces is released once the change is stored. Another
// partner's church is not found.
func (s *Service) UpdateChurch(ctx context.Context, partner, churchID string, p domain.ChurchPatch) (domain.Church, error) {
	s = s.as("app.UpdateChurch")
	cmd := eventlog.Command{Partner: partner, Aggregate: domain.ChurchChanges, LastOnly: true}
	ids, err := s.reserveChanged(ctx, &cmd, churchID, p)
	if err != nil {
		return domain.Church{}, err
	}
	ctx, cancel := ids.appendBy(ctx)
	defer cancel()
	var freed *reservations.Reservation
	c, err := s.changeChurch(ctx, cmd, churchID, func(ctx context.Context, c domain.Church) (*domain.Event, error) {
		ev, next, err := domain.UpdateChurch(partner, c, p, ids.used, s.Now())
		freed = nil
		if err != nil || ev == nil || c.ExternalID == nil || equalOptional(next.ExternalID, c.ExternalID) {
			return ev, err
		}
		// The reservation of the external id the change replaces, as it
		// stands while the church holds it: no one else can take it
		// before the change is stored.
		r, found, err := s.reservations.Held(ctx, reservations.ExternalID(partner, *c.ExternalID))
		if found {
			freed = &r
		}
		return ev, err
	})
	if err == nil && freed != nil {
		s.releaseExternalID(ctx, *freed)
	}
	return c, err
}

// reserveChanged reserves the external id a change gives the church, when
// the change, decided on the church as this instance's projections hold
// it, would store a new one. The change itself is decided again on its
// turn, where a new external id is free only if reserved here.
func (s *Service) reserveChanged(ctx context.Context, cmd *eventlog.Command, churchID string, p domain.ChurchPatch) (heldIDs, error) {
	c, err := s.importedChurch(ctx, cmd.Partner, churchID)
	if err != nil {
		return heldIDs{}, err
	}
	used, lookupErr := s.externalIDLookup(cmd.Partner)
	ev, next, err := domain.UpdateChurch(cmd.Partner, c, p, used, s.Now())
	if *lookupErr != nil {
		return heldIDs{}, *lookupErr
	}
	if err != nil || ev == nil || next.ExternalID == nil || equalOptional(next.ExternalID, c.ExternalID) {
		return heldIDs{}, nil
	}
	return s.reserveExternalIDs(ctx, cmd, []string{*next.ExternalID})
}

// ArchiveChurch archives a church: it stays readable and keeps its
// enrollments, but takes no new donor sessions. Archiving an archived
// church changes nothing.
func (s *Service) ArchiveChurch(ctx context.Context, partner, churchID string) (domain.Church, error) {
	s = s.as("app.ArchiveChurch")
	cmd := eventlog.Command{Partner: partner, Aggregate: domain.ChurchChanges, LastOnly: true}
	return s.changeChurch(ctx, cmd, churchID, func(_ context.Context, c domain.Church) (*domain.Event, error) {
		ev, _ := domain.ArchiveChurch(partner, c, s.Now())
		return ev, nil
	})
}

// changeChurch runs one decision about one church on the partner's
// church changes (cmd: every change before it applied, so the decision
// sees the church as they left it) and answers the church as the
// projections then hold it.
func (s *Service) changeChurch(ctx context.Context, cmd eventlog.Command, churchID string,
	decide func(ctx context.Context, c domain.Church) (*domain.Event, error)) (domain.Church, error) {
	cmd.Decide = func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
		if err := s.waitApplied(ctx, h.Last); err != nil {
			return nil, err
		}
		c, err := s.importedChurch(ctx, cmd.Partner, churchID)
		if err != nil {
			return nil, err
		}
		return decide(ctx, c)
	}
	if _, err := s.run(ctx, cmd); err != nil {
		return domain.Church{}, err
	}
	return s.churchOf(cmd.Partner, churchID)
}

// importedChurch is one of the partner's churches, or a not-found error.
// Imports take no turn with changes, so a church imported a moment ago (on
// another instance, say) may not be applied here yet: one not found is
// looked for again once the projections caught up with the ledger.
func (s *Service) importedChurch(ctx context.Context, partner, churchID string) (domain.Church, error) {
	if _, ok, err := s.store.Church(partner, churchID); err != nil || !ok {
		if err := s.caughtUp(ctx); err != nil {
			return domain.Church{}, err
		}
	}
	return s.churchOf(partner, churchID)
}

// externalIDLookup is the uniqueness rule's view of the partner's external
// ids as this instance's projections hold them; a failed read is kept in
// the error it returns, for the caller to fail with after deciding.
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

func equalOptional(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
