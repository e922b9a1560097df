package stripeidentity

import "time"

// Status is a VerificationSession's status as Stripe reports it
// (docs.stripe.com/identity/how-sessions-work).
type Status string

// The four statuses Stripe documents for a VerificationSession.
const (
	// StatusRequiresInput is the status of a new session, and the status a
	// session returns to when a check fails; last_error then says why.
	StatusRequiresInput Status = "requires_input"
	// StatusProcessing follows the user's submission; most checks finish
	// within a minute.
	StatusProcessing Status = "processing"
	// StatusVerified means every check completed and passed.
	StatusVerified Status = "verified"
	// StatusCanceled means the session was canceled through the API or the
	// Dashboard and can never be submitted again.
	StatusCanceled Status = "canceled"
)

// LastError is a session's last_error: why its last submission, or the
// user's session at Stripe, did not verify.
type LastError struct {
	// Code is Stripe's machine-readable reason, e.g. consent_declined or
	// document_unverified_other. Decide maps it to an outcome.
	Code string `json:"code"`
	// Reason is Stripe's human-readable explanation. It may describe the
	// person's document, so it is for operators, never for partners.
	Reason string `json:"reason"`
}

// Session is what the service needs of a VerificationSession. Verified
// outputs (name, date of birth, address, id number) are deliberately not
// decoded: the service decides on the outcome alone and keeps no identity
// data.
type Session struct {
	ID     string
	Status Status
	// URL is the hosted verification page to redirect the donor to. Stripe
	// documents it as short-lived and single-use, present while the session
	// requires input; it must not be stored, logged or sent anywhere but the
	// donor's browser.
	URL       string
	LastError *LastError
	// Metadata is what the service attached at creation; Reference is its
	// ReferenceKey entry.
	Metadata  map[string]string
	Reference string
	Livemode  bool
	Created   time.Time
}

// Outcome is the service's vendor-neutral view of a session: the three
// identity decisions the donor flow knows, plus Pending for "no decision
// yet". The strings equal the domain's KYC outcome values.
type Outcome string

// The outcomes Decide can return.
const (
	Passed  Outcome = "passed"
	Review  Outcome = "review"
	Failed  Outcome = "failed"
	Pending Outcome = "pending"
)

// Decide maps a session's status and last_error to an outcome and a short
// reason (Stripe's error code, or the status when there is none to give).
//
// Stripe reports success and failure through one status, requires_input,
// and says what went wrong only in last_error.code. The mapping:
//
//   - verified: Passed.
//   - processing: Pending; the donor has submitted and Stripe is checking.
//   - canceled: Failed with reason "canceled"; a canceled session can never
//     be submitted again, so nothing more will come from it.
//   - requires_input without last_error: Pending; the donor has not
//     submitted yet (every new session starts here).
//   - requires_input with abandoned or device_not_supported: Pending; the
//     donor left or used a device Stripe cannot use, decided nothing, and
//     can try again at a fresh URL (Stripe gives one on retrieve).
//   - requires_input with consent_declined, under_supported_age,
//     email_verification_declined or phone_verification_declined: Failed;
//     the donor refused to be verified or is ineligible, which no reviewer
//     can overturn.
//   - requires_input with any other code (document_*, selfie_*, id_number_*,
//     *_unverified_other, country_not_supported) or a code Stripe adds
//     later: Review; a check did not verify, which can be a poor photo or an
//     unusual document as easily as fraud, and a person should look before
//     a donor is turned away.
func Decide(status Status, lastErr *LastError) (Outcome, string) {
	switch status {
	case StatusVerified:
		return Passed, ""
	case StatusProcessing:
		return Pending, string(StatusProcessing)
	case StatusCanceled:
		return Failed, string(StatusCanceled)
	}
	if lastErr == nil || lastErr.Code == "" {
		return Pending, string(StatusRequiresInput)
	}
	switch lastErr.Code {
	case "abandoned", "device_not_supported":
		return Pending, lastErr.Code
	case "consent_declined", "under_supported_age", "email_verification_declined", "phone_verification_declined":
		return Failed, lastErr.Code
	}
	return Review, lastErr.Code
}

// Outcome is Decide applied to the session.
func (s Session) Outcome() (Outcome, string) { return Decide(s.Status, s.LastError) }

// sessionObject is the subset of Stripe's VerificationSession object
// (docs.stripe.com/api/identity/verification_sessions/object) the package
// reads. Unknown fields are ignored so that newer API versions still decode.
type sessionObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	Created   int64             `json:"created"`
	LastError *LastError        `json:"last_error"`
	Livemode  bool              `json:"livemode"`
	Metadata  map[string]string `json:"metadata"`
	Status    Status            `json:"status"`
	Type      string            `json:"type"`
	URL       string            `json:"url"`
}

// sessionObjectName is the object field of every VerificationSession.
const sessionObjectName = "identity.verification_session"

func (o sessionObject) session() Session {
	return Session{
		ID:        o.ID,
		Status:    o.Status,
		URL:       o.URL,
		LastError: o.LastError,
		Metadata:  o.Metadata,
		Reference: o.Metadata[ReferenceKey],
		Livemode:  o.Livemode,
		Created:   time.Unix(o.Created, 0).UTC(),
	}
}
