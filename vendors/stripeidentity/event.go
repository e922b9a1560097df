package stripeidentity

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// The VerificationSession event types Stripe documents
// (docs.stripe.com/api/identity/verification_sessions, "Events"). The
// service acts on the four that carry a status change; created and
// redacted are read and reported as ignorable.
const (
	EventVerified      = "identity.verification_session.verified"
	EventRequiresInput = "identity.verification_session.requires_input"
	EventProcessing    = "identity.verification_session.processing"
	EventCanceled      = "identity.verification_session.canceled"
	EventCreated       = "identity.verification_session.created"
	EventRedacted      = "identity.verification_session.redacted"
)

// statusOf is the session status each acted-on event type reports.
var statusOf = map[string]Status{
	EventVerified:      StatusVerified,
	EventRequiresInput: StatusRequiresInput,
	EventProcessing:    StatusProcessing,
	EventCanceled:      StatusCanceled,
}

var (
	// ErrIgnored: a well-formed event the service does not act on (another
	// event type, or another object). The edge acknowledges it with 2xx so
	// that Stripe stops sending it, and does nothing else.
	ErrIgnored = errors.New("event type not used by the service")
	// ErrInvalidEvent: the body is not a Stripe event about a
	// VerificationSession in the documented shape.
	ErrInvalidEvent = errors.New("invalid Stripe event")
)

// Result is a verified event, normalised to what the service decides on.
type Result struct {
	// EventID is Stripe's evt_ id: the key to deduplicate deliveries by.
	EventID string
	// EventType is Stripe's event type.
	EventType string
	// Created is when Stripe created the event. Events can arrive out of
	// order; a later Created wins.
	Created time.Time
	// Livemode is false for events of test-mode keys; production should
	// refuse those.
	Livemode bool
	// SessionID is the VerificationSession's vs_ id.
	SessionID string
	// Reference is metadata[reference], the service's own reference given
	// at creation; Metadata holds every key given then.
	Reference string
	Metadata  map[string]string
	// Status is the session's status in the event.
	Status Status
	// Outcome and Reason are Decide applied to the session. Stripe does
	// not promise delivery order, so a processing event (Pending) can
	// arrive after the verified one: Pending never undoes a decision.
	Outcome Outcome
	Reason  string
}

// eventObject is Stripe's Event object (docs.stripe.com/api/events/object)
// with its data.object kept raw until its kind is known.
type eventObject struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	APIVersion string `json:"api_version"`
	Created    int64  `json:"created"`
	Data       *struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
	Livemode bool   `json:"livemode"`
	Type     string `json:"type"`
}

var (
	eventIDForm = regexp.MustCompile(`^evt_[0-9A-Za-z_]{1,250}$`)
	typeForm    = regexp.MustCompile(`^[a-z0-9_.]{1,100}$`)
)

// ParseWebhook verifies a webhook's signature on the raw body and then
// parses it; what the edge calls. The signature is checked first, so an
// unauthenticated body is never decoded.
func ParseWebhook(body []byte, signatureHeader, secret string, now time.Time) (Result, error) {
	if err := VerifySignature(signatureHeader, body, secret, now); err != nil {
		return Result{}, err
	}
	return ParseEvent(body)
}

// ParseEvent normalises an already verified event body. For an event the
// service does not act on, it returns the event's id and type with
// ErrIgnored; for a malformed one, an error wrapping ErrInvalidEvent.
func ParseEvent(body []byte) (Result, error) {
	var ev eventObject
	if err := json.Unmarshal(body, &ev); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if ev.Object != "event" || !eventIDForm.MatchString(ev.ID) || !typeForm.MatchString(ev.Type) || ev.Data == nil {
		return Result{}, fmt.Errorf("%w: not an event object with an evt_ id, a type and data", ErrInvalidEvent)
	}
	r := Result{EventID: ev.ID, EventType: ev.Type, Created: time.Unix(ev.Created, 0).UTC(), Livemode: ev.Livemode}
	status, acted := statusOf[ev.Type]
	if !acted {
		return r, ErrIgnored
	}
	var obj sessionObject
	if err := json.Unmarshal(ev.Data.Object, &obj); err != nil {
		return Result{}, fmt.Errorf("%w: data.object: %v", ErrInvalidEvent, err)
	}
	if obj.Object != sessionObjectName || !sessionIDForm.MatchString(obj.ID) {
		return Result{}, fmt.Errorf("%w: data.object is not a verification session", ErrInvalidEvent)
	}
	// The type names the transition; the object is the session as of the
	// event. They agree in every documented event; if they ever did not,
	// the object's own status is the fact to decide on.
	if obj.Status != "" {
		status = obj.Status
	}
	s := obj.session()
	r.SessionID, r.Reference, r.Metadata, r.Status = s.ID, s.Reference, s.Metadata, status
	r.Outcome, r.Reason = Decide(status, obj.LastError)
	return r, nil
}

// EventParams describe one VerificationSession event to build, as the
// sandbox's stand-in and the tests need them.
type EventParams struct {
	// EventID is the evt_ id; a random one when empty.
	EventID string
	// Type is one of the Event* types.
	Type string
	// Created stamps the event and, when SessionCreated is zero, the
	// session.
	Created        time.Time
	SessionCreated time.Time
	// SessionID is the vs_ id; a random one when empty.
	SessionID string
	// Status is the session's status; the status the type reports when
	// empty.
	Status    Status
	LastError *LastError
	Metadata  map[string]string
	Livemode  bool
}

// wireSession is the VerificationSession object as an event carries it, in
// the field order of Stripe's documented example. client_secret and url are
// null: Stripe documents both as nullable and short-lived, and an event
// (which is stored and can be listed for 30 days) is no place for either.
// last_verification_report is null too, and verified_outputs, which Stripe
// includes only when expanded, is absent: the sandbox verifies no one.
type wireSession struct {
	ID                     string            `json:"id"`
	Object                 string            `json:"object"`
	ClientReferenceID      *string           `json:"client_reference_id"`
	ClientSecret           *string           `json:"client_secret"`
	Created                int64             `json:"created"`
	LastError              *LastError        `json:"last_error"`
	LastVerificationReport *string           `json:"last_verification_report"`
	Livemode               bool              `json:"livemode"`
	Metadata               map[string]string `json:"metadata"`
	Options                map[string]any    `json:"options"`
	Redaction              *struct{}         `json:"redaction"`
	Status                 Status            `json:"status"`
	Type                   string            `json:"type"`
	URL                    *string           `json:"url"`
}

// wireEvent is Stripe's Event object in its documented field order.
type wireEvent struct {
	ID              string `json:"id"`
	Object          string `json:"object"`
	APIVersion      string `json:"api_version"`
	Created         int64  `json:"created"`
	Data            any    `json:"data"`
	Livemode        bool   `json:"livemode"`
	PendingWebhooks int    `json:"pending_webhooks"`
	Request         any    `json:"request"`
	Type            string `json:"type"`
}

// BuildEvent renders a VerificationSession event as Stripe sends it: an
// Event object whose data.object is the session. Sign the result with Sign
// and POST it with the Stripe-Signature header.
func BuildEvent(p EventParams) ([]byte, error) {
	status, known := statusOf[p.Type]
	if !known && p.Type != EventCreated && p.Type != EventRedacted {
		return nil, fmt.Errorf("%w: %q is not a verification session event type", ErrInvalidParams, p.Type)
	}
	if p.Status != "" {
		status = p.Status
	}
	if status == "" {
		status = StatusRequiresInput
	}
	if p.EventID == "" {
		p.EventID = NewID("evt_")
	}
	if p.SessionID == "" {
		p.SessionID = NewID("vs_")
	}
	if !eventIDForm.MatchString(p.EventID) || !sessionIDForm.MatchString(p.SessionID) {
		return nil, fmt.Errorf("%w: event id must start evt_ and session id vs_", ErrInvalidParams)
	}
	if p.Created.IsZero() {
		return nil, fmt.Errorf("%w: the event needs a creation time", ErrInvalidParams)
	}
	if p.SessionCreated.IsZero() {
		p.SessionCreated = p.Created
	}
	metadata := p.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	session := wireSession{
		ID: p.SessionID, Object: sessionObjectName, Created: p.SessionCreated.Unix(),
		LastError: p.LastError, Livemode: p.Livemode, Metadata: metadata,
		Options: map[string]any{"document": map[string]any{}}, Status: status, Type: "document",
	}
	ev := wireEvent{
		ID: p.EventID, Object: "event", APIVersion: APIVersion, Created: p.Created.Unix(),
		Data: map[string]any{"object": session}, Livemode: p.Livemode, PendingWebhooks: 1,
		Request: map[string]any{"id": nil, "idempotency_key": nil}, Type: p.Type,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// OutcomeEvent is the event the sandbox sends to report outcome o, chosen
// so that ParseEvent maps it back to o: passed is verified; review is
// requires_input with document_unverified_other (the document check did
// not verify); failed is requires_input with consent_declined (the donor
// declined to be verified). Pending has no single event and is refused.
func OutcomeEvent(o Outcome) (eventType string, lastErr *LastError, err error) {
	switch o {
	case Passed:
		return EventVerified, nil, nil
	case Review:
		return EventRequiresInput, &LastError{Code: "document_unverified_other", Reason: "The document could not be verified."}, nil
	case Failed:
		return EventRequiresInput, &LastError{Code: "consent_declined", Reason: "The user declined to be verified."}, nil
	}
	return "", nil, fmt.Errorf("%w: outcome must be passed, review or failed", ErrInvalidParams)
}

// idAlphabet is what Stripe's object ids are made of after the prefix.
const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns prefix followed by 24 random alphanumerics, the look of a
// Stripe id (evt_, vs_, req_). Nothing reads meaning into the rest.
func NewID(prefix string) string {
	b := make([]byte, 24)
	// crypto/rand.Read never returns an error since Go 1.24: it crashes
	// the program instead of handing out predictable bytes.
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}
