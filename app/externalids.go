package app

import (
	"context"
	"fmt"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/reservations"
	"github.com/partnergiving/giving/telemetry"
)

// The one rule that holds across a partner's churches is that external ids
// are unique within the partner. It is kept by a reservation per external
// id (Reservations), not by a turn on the partner's whole catalogue: a
// command that stores an external id reserves it first, and appends its
// event while its reservation holds, so commands naming different external
// ids, on this instance or any other, neither wait for nor conflict with
// one another. An external id is taken when a church holds it (the
// projections say so) or another command's reservation of it is live; a
// reservation whose holder is gone, and whose external id no church took,
// is taken over.

// heldIDs are the external ids a command reserved, and the time its event
// must be appended by for the reservations to hold.
type heldIDs struct {
	held map[string]bool
	by   time.Time
}

// appendMargin is how long before its reservations' lease ends a command
// must have sent its append: time for the append to be stored (a batch's
// publish takes at most 10 s) and for clocks to differ between instances.
const appendMargin = 15 * time.Second

// used is the uniqueness rule as the command's decision sees it: an
// external id is free for the command if, and only if, it holds it.
func (h heldIDs) used(ext string) bool { return !h.held[ext] }

// appendBy bounds ctx by the time the command's event must be appended by:
// an append not sent by then is never sent (eventlog.Command), so the
// reservations are taken over only once nothing of the command can be
// stored any more.
func (h heldIDs) appendBy(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.by.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, h.by)
}

// holderOf names who holds the reservations cmd makes: its dedup id when it
// runs for a request (every run of one request is one holder, since the
// ledger stores the event of only one of them), else a name of its own.
func (s *Service) holderOf(cmd *eventlog.Command) string {
	s.claim(cmd)
	if cmd.MsgID != "" {
		return cmd.MsgID
	}
	return domain.NewID("rsv_")
}

// reserveExternalIDs reserves each of the partner's external ids exts for
// cmd, and returns those it holds: the others are taken.
func (s *Service) reserveExternalIDs(ctx context.Context, cmd *eventlog.Command, exts []string) (_ heldIDs, err error) {
	ids := heldIDs{held: map[string]bool{}}
	if len(exts) == 0 {
		return ids, nil
	}
	holder := s.holderOf(cmd)
	ctx, span := telemetry.Start(ctx, "app.reserve")
	defer func() { telemetry.End(span, err) }()
	for _, ext := range exts {
		r, ok, err := s.reserveExternalID(ctx, cmd.Partner, ext, holder)
		if err != nil {
			return heldIDs{}, err
		}
		if !ok {
			continue
		}
		ids.held[ext] = true
		if by := r.Until.Add(-appendMargin); ids.by.IsZero() || by.Before(ids.by) {
			ids.by = by
		}
	}
	return ids, nil
}

// reserveExternalID reserves one of the partner's external ids for holder,
// or reports it taken (false). Another holder's live reservation is waited
// for, bounded: its command is about to store the external id, or to give
// up. A stale one is taken over once the projections, caught up with the
// ledger, show no church holding the external id: its holder appended
// before its lease ended or never will, so the ledger as it stands after
// the lease says which.
func (s *Service) reserveExternalID(ctx context.Context, partner, ext, holder string) (reservations.Reservation, bool, error) {
	key := reservations.ExternalID(partner, ext)
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	for attempt := 1; ; attempt++ {
		r, err := s.reservations.Reserve(ctx, key, holder)
		if err != nil || r.Mine {
			return r, r.Mine, err
		}
		if r.Stale {
			if err := s.caughtUp(wctx); err != nil {
				return r, false, fmt.Errorf("external id %q: %w", ext, err)
			}
		}
		if used, err := s.store.ExternalIDUsed(partner, ext); err != nil || used {
			return r, false, err
		}
		if r.Stale {
			if r, ok, err := s.reservations.TakeOver(ctx, r, holder); err != nil || ok {
				return r, ok, err
			}
			continue // it changed since: look again
		}
		if err := eventlog.Backoff(wctx, attempt); err != nil {
			return r, false, fmt.Errorf("%w: external id %q is being stored by another request", domain.ErrUnavailable, ext)
		}
	}
}

// releaseExternalID frees the reservation r of an external id a church no
// longer holds (changed or removed), unless it changed since it was read
// (another command took it over once the change was stored).
// A reservation not freed (the process stopped first) stays until its
// lease is over, and is then taken over as any stale one is.
func (s *Service) releaseExternalID(ctx context.Context, r reservations.Reservation) {
	if err := s.reservations.Release(ctx, r); err != nil {
		s.log.Warn().Err(err).Msg("an external id's reservation was not released; it is taken over once its lease ends")
	}
}
