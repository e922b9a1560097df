package domain

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"time"
)

// SessionStatus is what partners see of a donor session.
//
//	open ──(donor connects payroll; enrollment.created)──────────▶ completed
//	open ──(identity verification fails; donor_session.declined)─▶ declined
//	open ──(30 minutes pass; donor_session.expired)──────────────▶ expired
//
// Five wrong codes lock an open session (donor_session.locked): it stays
// open, showing the locked page, until it expires.
//
// A re-consent session (SessionPurposeUpdate) is the hosted flow for a
// raised enrollment value: it confirms the phone, then asks for consent to
// the new amount, and completes when given. It never reaches identity
// verification or payroll, and its lock and expiry are internal facts: the
// partner follows the enrollment (enrollment.updated or
// enrollment.update_expired), not the session, which it never sees.
type SessionStatus string

// The session statuses.
const (
	SessionOpen      SessionStatus = "open"
	SessionCompleted SessionStatus = "completed"
	SessionDeclined  SessionStatus = "declined"
	SessionExpired   SessionStatus = "expired"
)

// Session limits.
const (
	SessionLifetime = 30 * time.Minute
	CodeLifetime    = 10 * time.Minute
	CodeResendWait  = 30 * time.Second
	MaxCodeAttempts = 5
	MaxRedirectURL  = 2048
	ConsentVersion  = "2026-11-28"
	KYCPassed       = "passed"
	KYCReview       = "review"
	KYCFailed       = "failed"
	KYCPending      = "pending"
)

// SessionPurpose says what a session is for.
type SessionPurpose string

// The session purposes.
const (
	// SessionPurposeEnroll is a partner's donor session: the whole flow,
	// ending in a new enrollment.
	SessionPurposeEnroll SessionPurpose = ""
	// SessionPurposeUpdate asks the donor of an enrollment to consent to a
	// higher value.
	SessionPurposeUpdate SessionPurpose = "update"
)

// FlowStep is where the donor is in the hosted flow.
type FlowStep string

// The hosted flow's steps, in order.
const (
	StepVerifyPhone FlowStep = "verify_phone"
	StepConsent     FlowStep = "consent"
	StepKYC         FlowStep = "kyc"
	StepPayroll     FlowStep = "payroll"
	StepDone        FlowStep = "done"
	StepDeclined    FlowStep = "declined"
	StepLocked      FlowStep = "locked"
	StepExpired     FlowStep = "expired"
)

// SessionCreated opens a donor session. The donor's phone is not here: it
// lives only in the vault, under DonorID. A re-consent session names its
// enrollment and the value the donor gives now (Value is the one asked for).
type SessionCreated struct {
	DonorID       string         `json:"donor_id"`
	Mode          Mode           `json:"mode"`
	Value         Hundredths     `json:"value"`
	RedirectURL   string         `json:"redirect_url"`
	TokenHash     string         `json:"token_hash"`
	ExpiresAt     string         `json:"expires_at"`
	Purpose       SessionPurpose `json:"purpose,omitempty"`
	EnrollmentID  string         `json:"enrollment_id,omitempty"`
	PreviousValue Hundredths     `json:"previous_value,omitempty"`
	// Phone is the donor's phone, sealed with a phone key the vault holds:
	// stored in the session's own synced write, unreadable for good once
	// the key is erased. A re-consent session carries its origin's.
	Phone *SealedPhone `json:"phone,omitempty"`
}

// SealedPhone is a donor's phone as a session carries it: AES-GCM sealed
// with the vault's phone key Key, bound to the donor id. Only the vault
// opens it, and erasing the key (forgetting a donor) makes it random bytes.
type SealedPhone struct {
	Key    string `json:"key"`
	Sealed []byte `json:"sealed"`
}

// SessionOpened binds the session to the first browser that opened its url.
type SessionOpened struct {
	BindingHash string `json:"binding_hash"`
}

// CodeSent records that a verification code went to the donor's phone.
type CodeSent struct{}

// CodeRejected records a wrong verification code.
type CodeRejected struct {
	Attempts int `json:"attempts"`
}

// PhoneVerified records a correct verification code.
type PhoneVerified struct{}

// DonorSessionLocked is the public donor_session.locked event: too many
// wrong codes locked the session, which will not become an enrollment.
type DonorSessionLocked struct {
	DonorSessionID string `json:"donor_session_id" jsonschema:"pattern=^ds_[0-9A-Za-z]{27}$"`
}

// SessionLocked is how ledgers written before DonorSessionLocked recorded a
// lock: an internal event with no payload, under the same type name. It is
// retired (see registerRetired): old records still lock their session when
// folded, stay on their internal subjects and are never sent to partners,
// and no public event is made up for them afterwards. New locks are
// DonorSessionLocked.
type SessionLocked struct{}

// ConsentGiven records the donor's explicit consent to the versioned text.
type ConsentGiven struct {
	Version string `json:"version"`
	Text    string `json:"text"`
}

// KYCDecided records the identity-verification outcome and where it came
// from (seed donor or vendor webhook). New failures are recorded as
// DonorSessionDeclined instead; ledgers written before hold failures as a
// KYCDecided with outcome failed, which still declines the session when
// folded but was never announced to partners.
type KYCDecided struct {
	Outcome string `json:"outcome"`
	Source  string `json:"source"`
}

// PayrollFailed records that a payroll connection failed; the donor may
// retry. Provider is the payroll vendor (older records name a sandbox
// provider), Reason the vendor's word for what failed, when it gave one.
type PayrollFailed struct {
	Provider string `json:"provider"`
	Reason   string `json:"reason,omitempty"`
}

// DonorSessionCompleted records that the donor connected payroll. The session
// owns this moment, so completion and expiry are ordered on one aggregate;
// the enrollment it names is created right after (and re-created by whoever
// finds it missing, with the same id, so it exists exactly once).
type DonorSessionCompleted struct {
	EnrollmentID string `json:"enrollment_id"`
	Provider     string `json:"provider"`
}

// DonorSessionExpired is the public donor_session.expired event.
type DonorSessionExpired struct {
	DonorSessionID string `json:"donor_session_id" jsonschema:"pattern=^ds_[0-9A-Za-z]{27}$"`
}

// DonorSessionDeclined is the public donor_session.declined event: identity
// verification failed, and the session will not become an enrollment.
type DonorSessionDeclined struct {
	DonorSessionID string `json:"donor_session_id" jsonschema:"pattern=^ds_[0-9A-Za-z]{27}$"`
}

// ReconsentExpired records that a re-consent session's url ran out before
// the donor consented. The enrollment follows with
// enrollment.update_expired.
type ReconsentExpired struct{}

func (*SessionCreated) EventType() string        { return "donor_session.created" }
func (*SessionOpened) EventType() string         { return "donor_session.opened" }
func (*CodeSent) EventType() string              { return "donor_session.code_sent" }
func (*CodeRejected) EventType() string          { return "donor_session.code_rejected" }
func (*PhoneVerified) EventType() string         { return "donor_session.phone_verified" }
func (*SessionLocked) EventType() string         { return "donor_session.locked" }
func (*DonorSessionLocked) EventType() string    { return "donor_session.locked" }
func (*DonorSessionDeclined) EventType() string  { return "donor_session.declined" }
func (*ReconsentExpired) EventType() string      { return "donor_session.reconsent_expired" }
func (*ConsentGiven) EventType() string          { return "donor_session.consented" }
func (*KYCDecided) EventType() string            { return "donor_session.kyc_decided" }
func (*PayrollFailed) EventType() string         { return "donor_session.payroll_failed" }
func (*DonorSessionCompleted) EventType() string { return "donor_session.completed" }
func (*DonorSessionExpired) EventType() string   { return "donor_session.expired" }

func init() {
	register[SessionCreated](false, "A partner opened a donor session.")
	register[SessionOpened](false, "The first browser opened the session url and was bound to it.")
	register[CodeSent](false, "A verification code was sent to the donor's phone.")
	register[CodeRejected](false, "The donor entered a wrong verification code.")
	register[PhoneVerified](false, "The donor verified their phone.")
	register[DonorSessionLocked](true, "Too many wrong verification codes locked a donor session; it will not become an enrollment.")
	registerRetired[SessionLocked]("Too many wrong codes locked the session (before locks were public events).")
	register[DonorSessionDeclined](true, "Identity verification failed; the donor session is declined and will not become an enrollment.")
	register[ReconsentExpired](false, "A re-consent session's url expired before the donor consented.")
	register[ConsentGiven](false, "The donor consented to the giving terms.")
	register[KYCDecided](false, "Identity verification finished with an outcome.")
	register[PayrollFailed](false, "A payroll sign-in failed.")
	register[DonorSessionCompleted](false, "The donor connected payroll; the session's enrollment is created next.")
	register[DonorSessionExpired](true, "A donor session's url expired before the donor finished the flow.")
}

// Session is the donor session aggregate.
type Session struct {
	ID             string     `json:"id"`
	PartnerID      string     `json:"partner_id"`
	ChurchID       string     `json:"church_id"`
	DonorID        string     `json:"donor_id"`
	Giving         Giving     `json:"giving"`
	RedirectURL    string     `json:"redirect_url"`
	TokenHash      string     `json:"token_hash"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	Expired        bool       `json:"expired"`
	BindingHash    string     `json:"binding_hash,omitempty"`
	CodeSentAt     *time.Time `json:"code_sent_at,omitempty"`
	CodeAttempts   int        `json:"code_attempts"`
	Locked         bool       `json:"locked"`
	PhoneVerified  bool       `json:"phone_verified"`
	ConsentVersion string     `json:"consent_version,omitempty"`
	KYC            string     `json:"kyc,omitempty"`
	// Identity is the identity vendor's id of the verification the donor
	// was last sent to (IdentityStarted), "" before.
	Identity     string `json:"identity,omitempty"`
	PayrollFails int    `json:"payroll_fails"`
	// SwitchStarts counts the openings of the payroll vendor's widget, and
	// SwitchEnrollment names the enrollment the switch creates.
	SwitchStarts     int       `json:"switch_starts,omitempty"`
	SwitchEnrollment string    `json:"switch_enrollment_id,omitempty"`
	VendorUser       string    `json:"vendor_user,omitempty"`
	SwitchStartedAt  time.Time `json:"switch_started_at,omitzero"`
	// SwitchRefused is true when the vendor's last word since the widget
	// last opened is a failure.
	SwitchRefused bool          `json:"switch_refused,omitempty"`
	EnrollmentID  string        `json:"enrollment_id,omitempty"`
	Status        SessionStatus `json:"status"`
	// Purpose and Previous are set on re-consent sessions: Giving is the
	// value asked for, Previous the one the enrollment has.
	Purpose  SessionPurpose `json:"purpose,omitempty"`
	Previous Giving         `json:"previous,omitzero"`
	// Phone is the donor's sealed phone (SessionCreated.Phone); nil for a
	// session of a donor whose phone has its own vault entry.
	Phone *SealedPhone `json:"phone,omitempty"`
}

// Exists reports whether the session was created.
func (s *Session) Exists() bool { return s.ID != "" }

// Apply folds one of the session's events into its state.
func (s *Session) Apply(e Event) {
	switch p := e.Payload.(type) {
	case *SessionCreated:
		s.ID, s.PartnerID, s.ChurchID, s.DonorID = e.AggregateID, e.PartnerID, e.ChurchID, p.DonorID
		s.Giving, s.RedirectURL, s.TokenHash = Giving{Mode: p.Mode, Value: p.Value}, p.RedirectURL, p.TokenHash
		s.CreatedAt = e.OccurredAt
		s.ExpiresAt, _ = time.Parse(TimeLayout, p.ExpiresAt)
		s.Status = SessionOpen
		s.Purpose, s.EnrollmentID, s.Previous = p.Purpose, p.EnrollmentID, Giving{Mode: p.Mode, Value: p.PreviousValue}
		s.Phone = p.Phone
	case *SessionOpened:
		s.BindingHash = p.BindingHash
	case *CodeSent:
		// A new code does not reset the wrong tries: the limit is per
		// session, or a resend every 30 s would allow endless guessing.
		at := e.OccurredAt
		s.CodeSentAt = &at
	case *CodeRejected:
		s.CodeAttempts = p.Attempts
		// A re-consent session records its last wrong code as a rejection
		// (its lock is not a public fact), which locks it just the same.
		s.Locked = s.Locked || p.Attempts >= MaxCodeAttempts
	case *SessionLocked, *DonorSessionLocked:
		s.Locked = true
	case *PhoneVerified:
		s.PhoneVerified = true
	case *ConsentGiven:
		s.ConsentVersion = p.Version
		if s.Purpose == SessionPurposeUpdate {
			s.Status = SessionCompleted
		}
	case *IdentityStarted:
		s.Identity = p.Verification
	case *KYCDecided:
		s.KYC = p.Outcome
		if p.Outcome == KYCFailed {
			s.Status = SessionDeclined
		}
	case *DonorSessionDeclined:
		s.KYC, s.Status = KYCFailed, SessionDeclined
	case *PayrollSwitchStarted:
		s.SwitchStarts++
		s.SwitchRefused = false
		s.SwitchStartedAt = e.OccurredAt
		s.SwitchEnrollment = p.EnrollmentID
		if p.VendorUser != "" {
			s.VendorUser = p.VendorUser
		}
	case *PayrollFailed:
		s.PayrollFails++
		s.SwitchRefused = true
	case *DonorSessionCompleted:
		s.EnrollmentID, s.Status = p.EnrollmentID, SessionCompleted
	case *DonorSessionExpired, *ReconsentExpired:
		s.Expired, s.Status = true, SessionExpired
	}
}

// Step is where the donor stands in the hosted flow at now.
func (s *Session) Step(now time.Time) FlowStep {
	switch {
	case s.Status == SessionCompleted:
		return StepDone
	case s.Status == SessionDeclined:
		return StepDeclined
	case s.Status == SessionExpired || !now.Before(s.Deadline()):
		return StepExpired
	case s.Locked:
		return StepLocked
	case !s.PhoneVerified:
		return StepVerifyPhone
	case s.ConsentVersion == "":
		return StepConsent
	case s.KYC != KYCPassed:
		return StepKYC
	}
	return StepPayroll
}

// NewSession is what opening a session needs.
type NewSession struct {
	ID          string
	PartnerID   string
	ChurchID    string
	DonorID     string
	Giving      Giving
	RedirectURL string
	TokenHash   string
	// A re-consent session also names its enrollment, the value it has now,
	// and when the request expires (the enrollment decided it).
	Purpose      SessionPurpose
	EnrollmentID string
	Previous     Giving
	ExpiresAt    time.Time
	// Phone is the donor's phone, sealed by the vault.
	Phone *SealedPhone
}

// CreateSession decides opening a donor session that expires after
// SessionLifetime, or at n.ExpiresAt when given.
func CreateSession(s *Session, n NewSession, now time.Time) (Event, error) {
	if s.Exists() {
		return Event{}, ProblemConflict.New("Session %s already exists.", n.ID)
	}
	ev := NewEvent(n.PartnerID, n.ID, n.ChurchID, now, &SessionCreated{
		DonorID: n.DonorID, Mode: n.Giving.Mode, Value: n.Giving.Value, RedirectURL: n.RedirectURL, TokenHash: n.TokenHash,
		Purpose: n.Purpose, EnrollmentID: n.EnrollmentID, PreviousValue: n.Previous.Value, Phone: n.Phone,
	})
	expires := ev.OccurredAt.Add(SessionLifetime)
	if !n.ExpiresAt.IsZero() {
		expires = n.ExpiresAt
	}
	ev.Payload.(*SessionCreated).ExpiresAt = FormatTime(expires)
	return ev, nil
}

// Flow errors the hosted flow shows as pages or form errors.
var (
	ErrLinkUsed      = flowLinkUsed.New("This link was already opened in another browser.")
	ErrSessionClosed = flowSessionClosed.New("This session is no longer open.")
	ErrWrongStep     = flowWrongStep.New("This step is not available now.")
	ErrResendTooSoon = flowResendTooSoon.New("Please wait before asking for another code.")
	ErrCodeExpired   = flowCodeExpired.New("That code has expired. Ask for a new one.")
	ErrNoCode        = flowNoCode.New("Ask for a code first.")
	ErrTermsChanged  = FlowConsentChanged.New("The consent text changed since the page showed it.")
)

// Bind decides binding the session to a browser. held is the hash of the
// binding secret the browser presents ("" for none), fresh the hash of a new
// one. The first browser wins and is bound with fresh; the browser
// presenting the bound secret changes nothing, whichever instance it reaches
// (one whose read model has not seen the binding yet decides on the session
// as the ledger holds it); any other gets ErrLinkUsed. A presented secret
// never creates a binding, so no browser chooses its own.
func Bind(s *Session, held, fresh string, now time.Time) (*Event, error) {
	if s.BindingHash != "" {
		if held != "" && subtle.ConstantTimeCompare([]byte(s.BindingHash), []byte(held)) == 1 {
			return nil, nil
		}
		return nil, ErrLinkUsed
	}
	if err := s.open(now); err != nil {
		return nil, err
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &SessionOpened{BindingHash: fresh})
	return &ev, nil
}

// open checks the session can still change.
func (s *Session) open(now time.Time) error {
	if s.Status != SessionOpen || !now.Before(s.Deadline()) {
		return ErrSessionClosed
	}
	return nil
}

func (s *Session) at(step FlowStep, now time.Time) error {
	if err := s.open(now); err != nil {
		return err
	}
	if s.Step(now) != step {
		return ErrWrongStep
	}
	return nil
}

// SendCode decides sending a verification code. A resend waits
// CodeResendWait after the previous one.
func SendCode(s *Session, now time.Time) (*Event, error) {
	if err := s.at(StepVerifyPhone, now); err != nil {
		return nil, err
	}
	if s.CodeSentAt != nil && now.Sub(*s.CodeSentAt) < CodeResendWait {
		return nil, ErrResendTooSoon
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &CodeSent{})
	return &ev, nil
}

// ResendIn is how long the donor must wait before asking for another code.
func (s *Session) ResendIn(now time.Time) time.Duration {
	if s.CodeSentAt == nil {
		return 0
	}
	return max(0, CodeResendWait-now.Sub(*s.CodeSentAt))
}

// CheckCode decides the outcome of an entered code; correct says whether the
// SMS provider accepted it. A wrong code counts an attempt; the
// MaxCodeAttempts-th wrong code locks the session (donor_session.locked, or
// for a re-consent session a last rejection).
func CheckCode(s *Session, correct bool, now time.Time) (*Event, error) {
	if err := s.at(StepVerifyPhone, now); err != nil {
		return nil, err
	}
	switch {
	case s.CodeSentAt == nil:
		return nil, ErrNoCode
	case now.Sub(*s.CodeSentAt) > CodeLifetime:
		return nil, ErrCodeExpired
	}
	var p Payload = &PhoneVerified{}
	if !correct {
		p = &CodeRejected{Attempts: s.CodeAttempts + 1}
		if s.CodeAttempts+1 >= MaxCodeAttempts && s.Purpose == SessionPurposeEnroll {
			p = &DonorSessionLocked{DonorSessionID: s.ID}
		}
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, p)
	return &ev, nil
}

// ConsentTerms is who the consent names: the church the gift goes to, the
// partner by the name donors know it by, and where the donor asks that
// partner to stop the gift ("" when the partner gave none).
type ConsentTerms struct {
	Church  string
	Partner string
	Support string
}

// ConsentText is the versioned consent the donor agrees to. ConsentVersion
// names its wording (a new wording gets a new version, and a form shown
// under another version is refused); the names and the support contact fill
// it in.
func ConsentText(t ConsentTerms, g Giving) string {
	stop := "I can stop giving at any time by contacting " + t.Partner
	if t.Support != "" {
		stop += " support at " + t.Support
	}
	return "I authorize my employer's payroll provider to deduct " + g.Words() + " and send it to " + t.Church +
		" until I stop giving. " + stop + ". Consent version " + ConsentVersion + "."
}

// ConsentDigest identifies a consent text. The consent form carries the
// digest of the text it showed, so that a consent is recorded only to the
// very text the donor read, names and support contact included.
func ConsentDigest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:16])
}

// Consent decides recording the donor's consent to the current text. shown
// is the digest of the text the donor's form showed; a form that carries
// none (a scripted client) is taken to have shown the current one.
func Consent(s *Session, t ConsentTerms, shown string, now time.Time) (*Event, error) {
	if err := s.at(StepConsent, now); err != nil {
		return nil, err
	}
	text := ConsentText(t, s.Giving)
	if shown != "" && shown != ConsentDigest(text) {
		return nil, ErrTermsChanged
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &ConsentGiven{Version: ConsentVersion, Text: text})
	return &ev, nil
}

// DecideKYC decides recording an identity-verification outcome. Repeating
// the current outcome changes nothing; a passed or failed outcome is final.
// A failure declines the session (donor_session.declined).
func DecideKYC(s *Session, outcome, source string, now time.Time) (*Event, error) {
	switch outcome {
	case KYCPassed, KYCReview, KYCFailed:
	default:
		return nil, ProblemValidation.New("outcome must be passed, review or failed")
	}
	if s.KYC == outcome {
		return nil, nil
	}
	if err := s.at(StepKYC, now); err != nil {
		return nil, err
	}
	var p Payload = &KYCDecided{Outcome: outcome, Source: source}
	if outcome == KYCFailed {
		p = &DonorSessionDeclined{DonorSessionID: s.ID}
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, p)
	return &ev, nil
}

// SeedKYC is the sandbox's seed donors: their phone decides the identity
// outcome at once. Other donors verify at the identity vendor, which on the
// sandbox is its built-in stand-in (or POST /sandbox/simulate/kyc).
func SeedKYC(phone string) (string, bool) {
	switch phone {
	case "+12025550100":
		return KYCPassed, true
	case "+12025550101":
		return KYCReview, true
	case "+12025550102":
		return KYCFailed, true
	}
	return "", false
}

// CompleteSession decides that the payroll vendor reported the donor's
// switch submitted: the session completes, naming the enrollment the
// switch started with, which is created next. Completing a completed
// session changes nothing; a session whose widget never opened has no
// switch to complete.
func CompleteSession(s *Session, now time.Time) (*Event, error) {
	if s.Status == SessionCompleted {
		return nil, nil
	}
	if err := s.at(StepPayroll, now); err != nil {
		return nil, err
	}
	if s.SwitchEnrollment == "" {
		return nil, ErrWrongStep
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, &DonorSessionCompleted{EnrollmentID: s.SwitchEnrollment, Provider: PayrollVendor})
	return &ev, nil
}

// EnrollmentFor is what the session's enrollment is created from.
func (s *Session) EnrollmentFor() NewEnrollment {
	return NewEnrollment{ID: s.EnrollmentID, PartnerID: s.PartnerID, ChurchID: s.ChurchID, SessionID: s.ID, Giving: s.Giving}
}

// Expire decides the expiry of an open session whose url ran out
// (donor_session.expired, or for a re-consent session an internal record).
// It returns a nil event when the session is not open or not yet due.
func Expire(s *Session, now time.Time) *Event {
	if s.Status != SessionOpen || now.Before(s.Deadline()) {
		return nil
	}
	var p Payload = &DonorSessionExpired{DonorSessionID: s.ID}
	if s.Purpose == SessionPurposeUpdate {
		p = &ReconsentExpired{}
	}
	ev := NewEvent(s.PartnerID, s.ID, s.ChurchID, now, p)
	return &ev
}
