package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partnergiving/giving/domain"
)

// The hosted flow's identity step. After consent the donor is sent to the
// identity vendor's hosted page (StartIdentity), comes back to the flow,
// and waits there until the vendor's signed webhook decides (the edge's
// kycCompleted). The sandbox's seed donors are decided at consent instead
// (seedKYC).

// IdentityVerifier is the identity-verification vendor: Stripe Identity in
// production, the sandbox's built-in stand-in of it on the sandbox stack.
type IdentityVerifier interface {
	// StartIdentity starts a verification of a donor and returns where it
	// stands, with the URL of the page to send the donor to.
	StartIdentity(ctx context.Context, r domain.IdentityRequest) (domain.IdentityCheck, error)
	// CheckIdentity reads where a verification stands, with a fresh URL
	// while the donor can start again.
	CheckIdentity(ctx context.Context, id string) (domain.IdentityCheck, error)
	// CancelIdentity ends a verification nobody waits for any more, so
	// that its page can no longer be used.
	CancelIdentity(ctx context.Context, id string) error
	// PageOrigin is the origin of the vendor's hosted pages: the one place
	// besides the service a flow form may lead to.
	PageOrigin() string
}

// ErrIdentityService means the identity vendor could not be reached, or
// answered in a way the flow cannot use; the donor can try again.
var ErrIdentityService = domain.FlowIdentityUnavailable.New("The identity verification service could not be reached.")

// IdentityStage is what the identity step shows a donor with no decision
// that lets them go on.
type IdentityStage int

// The identity step's stages.
const (
	// IdentityToStart: the donor has not been to the vendor yet.
	IdentityToStart IdentityStage = iota
	// IdentityToResume: the donor came back without submitting anything,
	// and can go to the vendor again.
	IdentityToResume
	// IdentityChecking: the donor submitted; the vendor's decision is
	// awaited.
	IdentityChecking
	// IdentityInReview: the vendor's decision is that a person must look.
	IdentityInReview
)

// IdentityStage says where the donor at the identity step stands. It reads
// the vendor when the donor went there and nothing is decided yet (the
// donor may have come back without finishing), and writes nothing: the
// decision is the vendor's webhook's. Should the vendor not answer, the
// donor is shown the wait, which checks again.
func (s *Service) IdentityStage(ctx context.Context, sess domain.Session) IdentityStage {
	waiting := IdentityChecking
	switch {
	case sess.KYC == domain.KYCReview && sess.Identity == "":
		return IdentityInReview // a seed donor's, or the simulator's
	case sess.KYC == domain.KYCReview:
		waiting = IdentityInReview
	case sess.Identity == "":
		return IdentityToStart
	}
	c, err := s.identity.CheckIdentity(ctx, sess.Identity)
	if err != nil {
		s.log.Warn().Err(err).Str("session_id", sess.ID).Msg("identity verification could not be read")
		return waiting
	}
	if c.Open {
		// Not finished, or a check that did not verify which the vendor
		// lets the donor try again: a review nobody would make otherwise
		// is the donor's to retry.
		return IdentityToResume
	}
	return waiting
}

// IdentityPageOrigin is the origin of the identity vendor's hosted pages,
// which the identity step's form leads to.
func (s *Service) IdentityPageOrigin() string { return s.identity.PageOrigin() }

// StartIdentity sends the donor at the identity step to the vendor: it
// returns the vendor's page to redirect the donor's browser to, after
// recording on the session which verification the donor went to. A donor
// who went before and left without finishing goes back to the same
// verification (a fresh page of it) or, if the vendor ended it, to a new
// one; a donor whose submission the vendor is checking gets "" (the flow
// shows the wait).
func (s *Service) StartIdentity(ctx context.Context, sess domain.Session, now time.Time) (string, error) {
	s = s.as("app.StartIdentity")
	// A donor in review whose check the vendor lets them try again may go
	// back to it (IdentityStage); no other decided donor goes anywhere.
	retry := sess.KYC == domain.KYCReview && sess.Identity != ""
	if sess.Step(now) != domain.StepKYC || (sess.KYC != "" && !retry) {
		return "", domain.ErrWrongStep
	}
	// A seed donor is decided right after consent; should that request
	// not have got to record it, this one does, and the flow's page shows
	// where the decision leads.
	if seeded, err := s.seedKYC(ctx, sess, now); err != nil || seeded {
		return "", err
	}
	key := "identity-" + sess.ID
	if sess.Identity != "" {
		c, err := s.identity.CheckIdentity(ctx, sess.Identity)
		if err != nil {
			return "", s.identityFailed(sess, err)
		}
		if !c.Open {
			return "", nil
		}
		if c.URL != "" {
			return s.identityPage(sess, c.URL)
		}
		key += "-after-" + sess.Identity
	}
	c, err := s.identity.StartIdentity(ctx, domain.IdentityRequest{
		ChurchID: sess.ChurchID, DonorID: sess.DonorID, SessionID: sess.ID,
		ReturnURL: s.flowURL(sess.ID), IdempotencyKey: key,
	})
	if err != nil {
		return "", s.identityFailed(sess, err)
	}
	page, err := s.identityPage(sess, c.URL)
	if err != nil {
		return "", err
	}
	if _, err := s.updateSession(ctx, sess.PartnerID, sess.ID, func(cur *domain.Session) (*domain.Event, error) {
		return domain.StartIdentity(cur, c.ID, now)
	}); err != nil {
		return "", err
	}
	return page, nil
}

// identityPage checks that the vendor's page is where the flow's form may
// lead: a browser would refuse any other address.
func (s *Service) identityPage(sess domain.Session, page string) (string, error) {
	if !strings.HasPrefix(page, s.identity.PageOrigin()+"/") {
		return "", s.identityFailed(sess, fmt.Errorf("the vendor's page is not on its origin %s", s.identity.PageOrigin()))
	}
	return page, nil
}

// identityFailed logs why the vendor could not be used and tells the donor
// to try again.
func (s *Service) identityFailed(sess domain.Session, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	s.log.Error().Err(err).Str("session_id", sess.ID).Msg("identity verification could not be started")
	return ErrIdentityService
}

// cancelIdentity ends the verification of an expired session whose donor
// went to the vendor and was not decided, so that its page cannot be used
// any more. A failure is only logged: nothing waits for that verification.
func (s *Service) cancelIdentity(ctx context.Context, sess domain.Session) {
	if sess.Status != domain.SessionExpired || sess.Identity == "" || sess.KYC != "" {
		return
	}
	if err := s.identity.CancelIdentity(ctx, sess.Identity); err != nil {
		s.log.Warn().Err(err).Str("session_id", sess.ID).Msg("identity verification of an expired session not canceled")
	}
}
