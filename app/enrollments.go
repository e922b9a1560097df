package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// The enrollment's life after creation: the partner's cancel, pause, resume
// and update, the donor's consent to a higher value, and the reads. Each
// move is decided in domain on the enrollment as the ledger holds it; a move
// to the status it already has appends nothing and answers the enrollment.

// cancelReasonPurpose names the sealer of partners' free-text cancel
// reasons. The text may name people, and the ledger keeps what it holds for
// ever, so it is stored sealed (in an internal event, never on a webhook or
// the feed) and opened only to answer the partner's own reads.
const cancelReasonPurpose = "enrollment-cancel-reason"

// Enrollment is an enrollment as the partner reads it.
type Enrollment struct {
	projections.EnrollmentView
	// CancelReason is the partner's own reason for the cancel, opened; ""
	// for none.
	CancelReason string
	// ConsentURL is set only in the answer to a raise of the value: the
	// hosted flow where the donor consents to the new amount, shown once.
	// It expires with the pending update (Pending.ExpiresAt).
	ConsentURL string
}

// Enrollment returns one of the partner's enrollments.
func (s *Service) Enrollment(partner, id string) (Enrollment, error) {
	v, ok, err := s.store.Enrollment(partner, id)
	if err != nil {
		return Enrollment{}, err
	}
	if !ok {
		return Enrollment{}, domain.NotFound("enrollment", id)
	}
	return s.enrollmentOf(v), nil
}

// Enrollments lists the partner's enrollments in creation order after
// position after (nil: from the first), with the position of the last one
// returned and whether more follow.
func (s *Service) Enrollments(partner string, f projections.EnrollmentFilter, after []byte, limit int) ([]Enrollment, []byte, bool, error) {
	views, last, more, err := s.store.Enrollments(partner, f, after, limit)
	out := make([]Enrollment, len(views))
	for i, v := range views {
		out[i] = s.enrollmentOf(v)
	}
	return out, last, more, err
}

func (s *Service) enrollmentOf(v projections.EnrollmentView) Enrollment {
	out := Enrollment{EnrollmentView: v}
	if len(v.CancelNote) > 0 {
		text, err := s.cancelSeal.Open(v.CancelNote, cancelNoteAAD(v.PartnerID, v.ID))
		if err != nil {
			// Sealed under another master key: the reason is unreadable,
			// never wrong.
			s.log.Error().Err(err).Str("enrollment_id", v.ID).Msg("cancel reason cannot be opened")
		}
		out.CancelReason = string(text)
	}
	return out
}

// cancelNoteAAD binds a sealed reason to its enrollment, so it cannot be
// moved to another.
func cancelNoteAAD(partner, id string) []byte { return []byte(partner + "/" + id) }

// changeEnrollment runs one decision on an enrollment loaded from the
// ledger, and returns the enrollment as the decision left it (change).
func (s *Service) changeEnrollment(ctx context.Context, partner, id string, decide func(*domain.Enrollment) (*domain.Event, error)) (changed[domain.Enrollment], error) {
	if !domain.ValidID(domain.PrefixEnrollment, id) {
		return changed[domain.Enrollment]{}, domain.NotFound("enrollment", id)
	}
	return change(ctx, s, partner, id, func(e *domain.Enrollment) (*domain.Event, error) {
		if !e.Exists() {
			return nil, domain.NotFound("enrollment", id)
		}
		return decide(e)
	})
}

// answerEnrollment answers with the enrollment as the request left it, once
// the local projections show at least that, so reads that follow see it.
func (s *Service) answerEnrollment(ctx context.Context, c changed[domain.Enrollment]) (Enrollment, error) {
	if err := s.waitApplied(ctx, c.Seen); err != nil {
		return Enrollment{}, err
	}
	// The donor never changes: the projections' copy is the request's.
	v, ok, err := s.store.Enrollment(c.State.PartnerID, c.State.ID)
	if err != nil {
		return Enrollment{}, err
	}
	if !ok {
		return Enrollment{}, domain.NotFound("enrollment", c.State.ID)
	}
	v.Enrollment = c.State
	return s.enrollmentOf(v), nil
}

// moveEnrollment runs one status move and answers the enrollment.
func (s *Service) moveEnrollment(ctx context.Context, partner, id string, decide func(*domain.Enrollment, time.Time) (*domain.Event, error)) (Enrollment, error) {
	c, err := s.changeEnrollment(ctx, partner, id, func(e *domain.Enrollment) (*domain.Event, error) {
		return decide(e, s.Now())
	})
	if err != nil {
		return Enrollment{}, err
	}
	return s.answerEnrollment(ctx, c)
}

// PauseEnrollment pauses an active enrollment (enrollment.paused).
func (s *Service) PauseEnrollment(ctx context.Context, partner, id string) (Enrollment, error) {
	s = s.as("app.PauseEnrollment")
	return s.moveEnrollment(ctx, partner, id, domain.PauseEnrollment)
}

// ResumeEnrollment resumes a paused enrollment (enrollment.resumed).
func (s *Service) ResumeEnrollment(ctx context.Context, partner, id string) (Enrollment, error) {
	s = s.as("app.ResumeEnrollment")
	return s.moveEnrollment(ctx, partner, id, domain.ResumeEnrollment)
}

// CancelEnrollment cancels an enrollment (enrollment.canceled, reason_code
// partner_request). The partner's free-text reason, if any, is kept sealed
// in an internal event appended right after, by the same request (a retry
// with the same Idempotency-Key finishes it); a repeated cancel changes
// nothing, its reason included.
func (s *Service) CancelEnrollment(ctx context.Context, partner, id string, reason *string) (Enrollment, error) {
	s = s.as("app.CancelEnrollment")
	if reason != nil {
		if fe := domain.ValidCancelReason(*reason); fe != nil {
			var v domain.Validation
			v.Add(fe.Field, "%s", fe.Detail)
			return Enrollment{}, v.Err()
		}
	}
	c, err := s.changeEnrollment(ctx, partner, id, func(e *domain.Enrollment) (*domain.Event, error) {
		return domain.CancelEnrollment(e, s.Now())
	})
	if err != nil {
		return Enrollment{}, err
	}
	if c.Record != nil && reason != nil && *reason != "" {
		sealed := s.cancelSeal.Seal([]byte(*reason), cancelNoteAAD(partner, id))
		if c, err = s.changeEnrollment(ctx, partner, id, func(e *domain.Enrollment) (*domain.Event, error) {
			return domain.NoteCancelReason(e, sealed, s.Now()), nil
		}); err != nil {
			return Enrollment{}, err
		}
	}
	return s.answerEnrollment(ctx, c)
}

// UpdateEnrollment sets a new value for the enrollment, in its mode (value
// is the JSON text of the field). The same value changes nothing; a lower
// one applies at once (enrollment.updated). A higher one needs the donor's
// consent: the enrollment becomes pending_consent and the answer carries
// the url of a re-consent session, shown once, where the donor consents to
// the new amount until it expires (domain.SessionLifetime).
func (s *Service) UpdateEnrollment(ctx context.Context, partner, id string, value json.RawMessage) (Enrollment, error) {
	s = s.as("app.UpdateEnrollment")
	cur, err := s.Enrollment(partner, id)
	if err != nil {
		return Enrollment{}, err
	}
	g, err := parseValue(cur.Giving.Mode, value)
	if err != nil {
		return Enrollment{}, err
	}
	now := s.Now()
	consent := domain.ConsentRequest{SessionID: domain.NewID(domain.PrefixSession), ExpiresAt: now.Add(domain.SessionLifetime)}
	c, err := s.changeEnrollment(ctx, partner, id, func(e *domain.Enrollment) (*domain.Event, error) {
		// Only the donor can consent to more; a donor whose phone was
		// erased cannot confirm it's them any more. Checked as the
		// decision is made, so a retry that finds its earlier run's event
		// answers that, whatever became of the donor since.
		if g.Value > e.Giving.Value && e.Status != domain.EnrollmentPendingConsent && !e.Status.Final() {
			if err := s.checkEnrollmentDonor(ctx, cur); errors.Is(err, ErrDonorForgotten) {
				return nil, domain.ProblemConflict.New("The donor's details were erased, so they cannot consent to a higher value; the enrollment keeps its value.")
			} else if err != nil {
				return nil, err
			}
		}
		return domain.UpdateEnrollment(e, g.Value, consent, now)
	})
	if err != nil {
		return Enrollment{}, err
	}
	var url string
	if c.Record != nil {
		// After a crash takeover the record is the earlier run's: open the
		// session it named.
		ev, err := c.Record.Event()
		if err != nil {
			return Enrollment{}, err
		}
		if req, ok := ev.Payload.(*domain.EnrollmentUpdateRequest); ok {
			if url, err = s.openConsent(ctx, cur, req); err != nil {
				return Enrollment{}, err
			}
		}
	}
	out, err := s.answerEnrollment(ctx, c)
	out.ConsentURL = url
	return out, err
}

// parseValue reads a new value for an enrollment in mode.
func parseValue(mode domain.Mode, raw json.RawMessage) (domain.Giving, error) {
	var v domain.Validation
	switch {
	case len(raw) == 0 || string(raw) == "null":
		v.Add("value", "is required")
	case !IsJSONNumber(raw):
		v.Add("value", "must be a number")
	default:
		g, fe := domain.ParseGiving(string(mode), json.Number(raw))
		if fe == nil {
			return g, nil
		}
		v.Add(fe.Field, "%s", fe.Detail)
	}
	return domain.Giving{}, v.Err()
}

// openConsent opens the re-consent session an update request names (once:
// a retry finds it open) and returns its url.
func (s *Service) openConsent(ctx context.Context, e Enrollment, req *domain.EnrollmentUpdateRequest) (string, error) {
	origin, ok, err := s.store.Session(e.PartnerID, e.SessionID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("open consent: the enrollment's donor session is not in the projections")
	}
	expires, err := time.Parse(domain.TimeLayout, req.ExpiresAt)
	if err != nil {
		return "", err
	}
	n := domain.NewSession{
		ID: req.ConsentSessionID, PartnerID: e.PartnerID, ChurchID: e.ChurchID, DonorID: origin.DonorID, Phone: origin.Phone,
		Giving: domain.Giving{Mode: e.Giving.Mode, Value: req.Value}, RedirectURL: origin.RedirectURL,
		TokenHash: domain.HashSecret(s.flowToken(req.ConsentSessionID)),
		Purpose:   domain.SessionPurposeUpdate, EnrollmentID: e.ID, Previous: e.Giving, ExpiresAt: expires,
	}
	_, err = s.run(ctx, eventlog.Command{
		Partner: n.PartnerID, Aggregate: n.ID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			cur := domain.Fold[domain.Session](h.Events)
			if cur.Exists() {
				return nil, nil
			}
			ev, err := domain.CreateSession(&cur, n, s.Now())
			return &ev, err
		},
	})
	if err != nil {
		return "", err
	}
	return s.flowURL(n.ID), nil
}

// settleConsent moves the enrollment a re-consent session is for, once the
// session can no longer change: the new value when the donor consented, the
// old one when the session expired (domain.SettleUpdate).
func (s *Service) settleConsent(ctx context.Context, partner, enrollmentID string, sess domain.Session) error {
	_, err := s.changeEnrollment(ctx, partner, enrollmentID, func(e *domain.Enrollment) (*domain.Event, error) {
		return domain.SettleUpdate(e, &sess, s.Now()), nil
	})
	return err
}

// consentOpen checks that the enrollment a re-consent session is for still
// waits for it (not canceled meanwhile, nor settled).
func (s *Service) consentOpen(sess domain.Session) error {
	e, ok, err := s.store.Enrollment(sess.PartnerID, sess.EnrollmentID)
	if err != nil {
		return err
	}
	if !ok || e.Status != domain.EnrollmentPendingConsent || e.Pending == nil || e.Pending.ConsentSessionID != sess.ID {
		return domain.ErrSessionClosed
	}
	return nil
}

// SessionEnrollment is the enrollment a session made or is for, if it
// exists: the flow shows a canceled or ended enrollment's page instead of
// the session's.
func (s *Service) SessionEnrollment(sess domain.Session) (projections.EnrollmentView, bool, error) {
	if sess.EnrollmentID == "" {
		return projections.EnrollmentView{}, false, nil
	}
	return s.store.Enrollment(sess.PartnerID, sess.EnrollmentID)
}

// settleConsents ends the waits for consent that ran out: it closes each
// one's re-consent session (unless the donor consented first: the session
// orders the two) and then moves the enrollment as the session ended. It
// also finishes consents whose enrollment move a failure left undone.
func (s *Service) settleConsents(ctx context.Context) {
	due, err := s.store.ConsentsDue(s.Now(), 500)
	if err != nil {
		s.log.Error().Err(err).Msg("consent sweep")
		return
	}
	for _, ref := range due {
		if err := s.settleDue(ctx, ref); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Str("enrollment_id", ref.EnrollmentID).Msg("consent expiry")
		}
	}
}

func (s *Service) settleDue(ctx context.Context, ref projections.EnrollmentRef) error {
	e, ok, err := s.store.Enrollment(ref.PartnerID, ref.EnrollmentID)
	if err != nil || !ok || e.Pending == nil {
		return err
	}
	// Closing the session settles the enrollment, as does finding it
	// completed by a consent whose enrollment move failed.
	_, err = s.expireSession(ctx, ref.PartnerID, e.Pending.ConsentSessionID, s.Now())
	if domain.ErrorKind(err) != domain.KindNotFound {
		return err
	}
	// The request that asked for the update never opened the session:
	// nobody can consent, and the update expires.
	return s.settleConsent(ctx, ref.PartnerID, ref.EnrollmentID, domain.Session{})
}
