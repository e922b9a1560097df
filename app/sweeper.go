package app

import (
	"context"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/vault"
)

// SweepSessions expires open sessions whose url ran out, emitting
// donor_session.expired for each, creates the enrollments that completed
// sessions lack, and ends the waits for a donor's consent to a higher value
// that ran out (enrollment.update_expired), every interval until ctx ends.
// Every instance may sweep: the expiry is a conditional append, and an
// enrollment is created under the id its session names, once, so only one
// of them records each.
func (s *Service) SweepSessions(ctx context.Context, every time.Duration) {
	s = s.as("app.SweepSessions")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.expireSessions(ctx)
		s.sweepEnrollments(ctx)
		s.settleConsents(ctx)
	}
}

func (s *Service) expireSessions(ctx context.Context) {
	due, err := s.store.DueSessions(s.Now(), 500)
	if err != nil {
		s.log.Error().Err(err).Msg("session sweep")
		return
	}
	for _, ref := range due {
		_, err := s.expireSession(ctx, ref.PartnerID, ref.SessionID, s.Now())
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Str("session_id", ref.SessionID).Msg("session expiry")
		}
	}
}

// enrollmentGrace is how long a completed session goes without its
// enrollment before the sweeper creates it: the flow creates it right after
// the completion and should be the one to.
const enrollmentGrace = 5 * time.Second

// sweepEnrollments creates the enrollment of every session that completed
// more than enrollmentGrace ago without one. The flow creates it right after
// the completion, but if that fails (the ledger out of reach, the process
// stopping) nothing else would until the donor reloads the done page.
func (s *Service) sweepEnrollments(ctx context.Context) {
	due, err := s.store.UnenrolledSessions(s.Now().Add(-enrollmentGrace), 500)
	if err != nil {
		s.log.Error().Err(err).Msg("enrollment sweep")
		return
	}
	for _, ref := range due {
		sess, ok, err := s.store.Session(ref.PartnerID, ref.SessionID)
		if err == nil && ok {
			err = s.ensureEnrollment(ctx, sess)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Str("session_id", ref.SessionID).Msg("enrollment creation")
		}
	}
}

// VaultGrace is how old a donor's own vault entry must be before the vault
// sweep asks whether a session refers to it: a session's event was
// appended milliseconds after such an entry was stored.
const VaultGrace = 10 * time.Minute

// SweepVault erases, until ctx ends, what the vault holds that no donor
// session refers to (vault.Vault.Sweep): a donor's own entry grace after
// it was stored, what a crash between storing a phone and appending its
// session left behind before sessions carried their phones; a phone key
// once it closed, if no session stored while it was open was sealed with
// it.
func (s *Service) SweepVault(ctx context.Context, grace time.Duration) {
	refs := vault.Refs{
		Donor: func(ctx context.Context, donor string) (bool, error) {
			wctx, cancel := context.WithTimeout(ctx, readWait)
			defer cancel()
			if err := s.projector.CatchUp(wctx); err != nil {
				return false, err
			}
			return s.store.DonorReferenced(donor)
		},
		Key: func(ctx context.Context, key string, from, to time.Time) (bool, error) {
			used := false
			err := sessionsStored(ctx, s.ledger, from, to, func(p *domain.SessionCreated) bool {
				used = p.Phone != nil && p.Phone.Key == key
				return used
			})
			return used, err
		},
	}
	for ctx.Err() == nil {
		err := s.vault.Sweep(ctx, grace, refs)
		if err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg("vault sweep stopped; restarting")
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
