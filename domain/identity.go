package domain

import "time"

// Identity verification runs at a vendor's hosted page: the service starts a
// verification, sends the donor's browser there, and the vendor decides in
// a signed webhook (KYCDecided, DonorSessionDeclined). These are the values
// the service and any identity vendor exchange; the vendor's wire format is
// its adapter's business.

// IdentityRequest asks an identity vendor to verify a donor. It names the
// donor by the service's opaque ids only: the vendor collects the person's
// document from the person, and gets no phone, name or email from the
// service.
type IdentityRequest struct {
	ChurchID  string
	DonorID   string
	SessionID string
	// ReturnURL is where the vendor sends the donor's browser back to.
	ReturnURL string
	// IdempotencyKey makes a retried start return the same verification.
	IdempotencyKey string
}

// IdentityCheck is where a verification stands at the vendor.
type IdentityCheck struct {
	// ID is the vendor's id of the verification.
	ID string
	// URL is the vendor's page to send the donor to while Open; "" when
	// the donor cannot act there (or, while Open, when a new verification
	// must be started). It is short-lived and single-use at some vendors:
	// it goes to the donor's browser and nowhere else.
	URL string
	// Open means the donor has not submitted anything to decide on (they
	// left the vendor's page, or have not reached it): they can start
	// again. Otherwise the vendor is checking, or has decided: the service
	// records a decision only from the vendor's signed webhook.
	Open bool
}

// IdentityStarted records that the donor was sent to the identity vendor's
// hosted page, and the vendor's id of that verification. The donor then
// waits for the vendor's decision.
type IdentityStarted struct {
	Verification string `json:"verification"`
}

func (*IdentityStarted) EventType() string { return "donor_session.identity_started" }

func init() {
	register[IdentityStarted](false, "The donor was sent to the identity vendor's hosted page to verify their identity.")
}

// StartIdentity decides recording that the donor's identity verification
// started at the vendor under verification. It is for a donor at the
// identity step with no decision yet; recording the verification already
// recorded changes nothing.
func StartIdentity(s *Session, verification string, now time.Time) (*Event, error) {
	if err := s.at(StepKYC, now); err != nil {
		return nil, err
	}
	if s.KYC != "" {
		return nil, ErrWrongStep
	}
	if verification == "" {
		return nil, ProblemValidation.New("verification must name the vendor's verification")
	}
	if s.Identity == verification {
		return nil, nil
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &IdentityStarted{Verification: verification})
	return &ev, nil
}
