package app

import (
	"context"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// A partner's own API keys: listed without their secrets, rolled with an
// overlap, revoked with another key. Operators keep issuing and revoking
// keys from the console (Operators); both write the same partner events.

// APIKey is one of the partner's live keys as it may see it: never the key.
type APIKey struct {
	Prefix    string
	CreatedAt time.Time
	// LastUsedAt is the hour of the key's last use; zero when unknown.
	LastUsedAt time.Time
	// ExpiresAt is when a rolled key stops working; nil otherwise.
	ExpiresAt *time.Time
}

// NoteKeyUse records, without waiting, that a key was used now.
func (s *Service) NoteKeyUse(keyID string) {
	if s.keyUse != nil {
		s.keyUse.Note(keyID, s.cfg.Now())
	}
}

// APIKeys lists the partner's live keys (neither revoked nor expired),
// oldest first.
func (s *Service) APIKeys(ctx context.Context, partner string) ([]APIKey, error) {
	p, _, err := s.store.Partner(partner)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := []APIKey{}
	for _, k := range p.Keys {
		if !k.Live(now) {
			continue
		}
		key := APIKey{Prefix: k.Prefix, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt}
		if s.keyUse != nil {
			if key.LastUsedAt, err = s.keyUse.Last(ctx, k.ID); err != nil {
				return nil, err
			}
		}
		out = append(out, key)
	}
	return out, nil
}

// RolledKey is a new key, shown once, and until when the rolled one works.
type RolledKey struct {
	Secret            string
	Prefix            string
	CreatedAt         time.Time
	PreviousPrefix    string
	PreviousExpiresAt time.Time
}

// RollKey issues the partner a new key in place of the one it calls with
// (keyID), which keeps working for overlap. Only the new key's hash is
// stored, so an answer lost in a crash cannot be shown again: a recalled
// roll is refused, and the partner rolls again (with the old key, until it
// expires, or any other live key).
func (s *Service) RollKey(ctx context.Context, partner, keyID string, overlap time.Duration) (RolledKey, error) {
	s = s.as("app.RollKey")
	key := domain.GenerateKey(s.cfg.Env)
	out, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: partner,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.RollKey(&p, keyID, key, overlap, s.cfg.Now())
			return &ev, err
		},
	})
	if err != nil {
		return RolledKey{}, err
	}
	ev, err := out.Record.Event()
	if err != nil {
		return RolledKey{}, err
	}
	rolled, ok := ev.Payload.(*domain.KeyRolled)
	if !ok || rolled.KeyID != key.ID {
		return RolledKey{}, domain.ProblemConflict.New("An earlier run of this request rolled the key, and its new key cannot be shown again (only its hash is kept). Roll again with a new Idempotency-Key.")
	}
	p, _, err := s.store.Partner(partner)
	if err != nil {
		return RolledKey{}, err
	}
	r := RolledKey{Secret: key.Secret, Prefix: key.Prefix, CreatedAt: ev.OccurredAt, PreviousExpiresAt: rolled.PreviousExpiresAt}
	for _, k := range p.Keys {
		if k.ID == keyID {
			r.PreviousPrefix = k.Prefix
		}
	}
	return r, nil
}

// RevokeKey revokes one of the partner's live keys, shown as prefix, with
// another (callerKeyID); the calling key cannot revoke itself.
func (s *Service) RevokeKey(ctx context.Context, partner, prefix, callerKeyID string) error {
	s = s.as("app.RevokeKey")
	_, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: partner,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.RevokeOtherKey(&p, prefix, callerKeyID, s.cfg.Now())
			return &ev, err
		},
	})
	return err
}
