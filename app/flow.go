package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/vault"
)

// The hosted donor flow's use cases. Each step decides in domain on the
// session as the ledger holds it; the transport (the flow's pages) renders
// the session as the projections hold it afterwards.

// ErrPhoneService means the phone verification vendor could not be reached;
// the donor can try again.
var ErrPhoneService = errors.New("the phone verification service could not be reached")

// ErrDonorForgotten means the donor's phone was erased (or never stored):
// their flow cannot go on.
var ErrDonorForgotten = vault.ErrForgotten

// SessionByToken finds the session a hosted-flow url token opens.
func (s *Service) SessionByToken(token string) (domain.Session, bool, error) {
	return s.store.SessionByToken(domain.HashSecret(token))
}

// expireSession records that a session's url ran out, if it is open and
// due, and returns the session as the ledger then holds it. A re-consent
// session's enrollment then follows: once its session cannot change, the
// enrollment's wait for consent ends.
func (s *Service) expireSession(ctx context.Context, partner, id string, now time.Time) (domain.Session, error) {
	after, err := s.updateSession(ctx, partner, id, func(cur *domain.Session) (*domain.Event, error) {
		return domain.Expire(cur, now), nil
	})
	if err == nil && after.Purpose == domain.SessionPurposeUpdate && after.Status != domain.SessionOpen {
		err = s.settleConsent(ctx, partner, after.EnrollmentID, after)
	}
	if err == nil {
		s.cancelIdentity(ctx, after)
	}
	return after, err
}

// checkDonor reports ErrDonorForgotten when the session's donor's phone is
// gone.
func (s *Service) checkDonor(ctx context.Context, sess domain.Session) error {
	_, err := s.phone(ctx, sess)
	return err
}

// checkEnrollmentDonor is checkDonor for the session that enrolled e.
func (s *Service) checkEnrollmentDonor(ctx context.Context, e Enrollment) error {
	sess, ok, err := s.store.Session(e.PartnerID, e.SessionID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("enrollment %s: its donor session %s is not in the projections", e.ID, e.SessionID)
	}
	return s.checkDonor(ctx, sess)
}

// phone is the session's donor's phone, from the vault.
func (s *Service) phone(ctx context.Context, sess domain.Session) (string, error) {
	return s.vault.Phone(ctx, sess.DonorID, sess.Phone)
}

// PhoneEnding is the last two digits of the session's donor's phone, all
// the flow ever shows of it.
func (s *Service) PhoneEnding(ctx context.Context, sess domain.Session) (string, error) {
	phone, err := s.phone(ctx, sess)
	if err != nil {
		return "", err
	}
	return phone[len(phone)-2:], nil
}

// SendCode sends a verification code (the first, or a resend).
func (s *Service) SendCode(ctx context.Context, sess domain.Session, now time.Time) error {
	s = s.as("app.SendCode")
	phone, err := s.phone(ctx, sess)
	if err != nil {
		return err
	}
	if _, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.SendCode(cur, now)
	}); err != nil {
		return err
	}
	if err := s.phones.Send(ctx, phone); err != nil {
		s.log.Error().Err(err).Str("session_id", sess.ID).Msg("sms send failed")
		return ErrPhoneService
	}
	return nil
}

// CodeCheck is how a code check went.
type CodeCheck struct {
	Correct bool
	// Locked is true when this wrong code was the last one allowed.
	Locked bool
}

// CheckCode checks an entered code. The domain first says whether a check
// may happen at all (a code was sent, it has not expired, the session is
// not locked), so the vendor is asked only when it counts; then the
// vendor's answer is recorded, counting a wrong try.
func (s *Service) CheckCode(ctx context.Context, sess domain.Session, code string, now time.Time) (CodeCheck, error) {
	s = s.as("app.CheckCode")
	probe := sess
	if _, err := domain.CheckCode(&probe, false, now); err != nil {
		return CodeCheck{}, err
	}
	phone, err := s.phone(ctx, sess)
	if err != nil {
		return CodeCheck{}, err
	}
	correct, err := s.phones.Check(ctx, phone, code)
	if err != nil {
		s.log.Error().Err(err).Str("session_id", sess.ID).Msg("sms check failed")
		return CodeCheck{}, ErrPhoneService
	}
	after, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.CheckCode(cur, correct, now)
	})
	return CodeCheck{Correct: correct, Locked: after.Locked}, err
}

// Consent records the donor's consent to the text the page showed (shown
// is its digest, domain.ConsentDigest), then on
// the sandbox lets a seed donor's phone decide identity verification. On a
// re-consent session, the consent completes the session and the new value
// takes effect (enrollment.updated); it is refused (ErrSessionClosed) once
// the enrollment no longer waits for it.
func (s *Service) Consent(ctx context.Context, sess domain.Session, shown string, now time.Time) error {
	s = s.as("app.Consent")
	church, err := s.ChurchName(sess)
	if err != nil {
		return err
	}
	brand, err := s.Brand(sess)
	if err != nil {
		return err
	}
	if sess.Purpose == domain.SessionPurposeUpdate {
		if err := s.consentOpen(sess); err != nil {
			return err
		}
	}
	after, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.Consent(cur, brand.ConsentTerms(church), shown, now)
	})
	if err != nil {
		return err
	}
	if after.Purpose == domain.SessionPurposeUpdate {
		return s.settleConsent(ctx, after.PartnerID, after.EnrollmentID, after)
	}
	_, err = s.seedKYC(ctx, after, now)
	return err
}

// seedKYC decides identity verification at once for the sandbox's seed
// donors, and reports whether it did. Other donors go to the identity
// vendor (the sandbox's stand-in, or the simulator).
func (s *Service) seedKYC(ctx context.Context, sess domain.Session, now time.Time) (bool, error) {
	if s.cfg.Env != domain.Sandbox || sess.Step(now) != domain.StepKYC || sess.KYC != "" {
		return false, nil
	}
	phone, err := s.phone(ctx, sess)
	if err != nil {
		return false, err
	}
	outcome, ok := domain.SeedKYC(phone)
	if !ok {
		return false, nil
	}
	_, err = s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.DecideKYC(cur, outcome, "seed", now)
	})
	return err == nil, err
}

// ChurchName is the name of the session's church, as the consent names it.
func (s *Service) ChurchName(sess domain.Session) (string, error) {
	c, err := s.churchOf(sess.PartnerID, sess.ChurchID)
	return c.Name, err
}
