package domain

import (
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Webhook endpoints: where a partner wants its events pushed.
//
// An endpoint is its own aggregate (id we_...), created and deleted by the
// partner. Its signing secret is generated at creation, shown once, and
// reaches the ledger only sealed: the domain sees opaque bytes, never the
// plaintext. Several endpoints can be active at once, which is how a partner
// rotates a secret (create the new one, confirm it receives events, delete the
// old one).

// Limits on webhook endpoints.
const (
	// MaxWebhookEndpoints bounds a partner's endpoints, and so the fan-out of
	// one event.
	MaxWebhookEndpoints = 16
	// MaxWebhookURL is the longest receiver address accepted.
	MaxWebhookURL = 2048
	// MaxWebhookEventTypes bounds event_types.
	MaxWebhookEventTypes = 32
	// WebhookSecretPrefix starts every endpoint secret.
	WebhookSecretPrefix = "whsec_"
	// webhookSecretBytes is how much randomness a secret holds.
	webhookSecretBytes = 32
	// AllEventTypes subscribes an endpoint to every event type, present and
	// future.
	AllEventTypes = "*"
	// WebhookTestEventType is the type of a test delivery's envelope.
	WebhookTestEventType = "webhook_endpoint.test"
)

// WebhookEndpointCreated is the internal webhook_endpoint.created event. The
// endpoint id is the aggregate id. SealedSecret is the signing secret
// encrypted by the layer above; the ledger never holds the plaintext.
type WebhookEndpointCreated struct {
	URL          string   `json:"url"`
	EventTypes   []string `json:"event_types"`
	SealedSecret []byte   `json:"sealed_secret"`
}

// WebhookEndpointDeleted is the internal webhook_endpoint.deleted event: the
// endpoint gets no further deliveries, retries included.
type WebhookEndpointDeleted struct{}

// WebhookEndpointTested is the public webhook_endpoint.test event: the body
// of a test delivery. It is built on demand and sent at once; it is never
// appended to the ledger, so it never appears on the feed. It belongs to no
// church, so its envelope carries an empty church_id.
type WebhookEndpointTested struct {
	WebhookEndpointID string `json:"webhook_endpoint_id"`
}

// WebhookEndpointAutoDisabled is the public webhook_endpoint.disabled event: the
// service disabled an endpoint whose every attempt failed for the
// configured span. It goes to the partner's other endpoints and the feed,
// so the partner learns of it without the dead receiver. It belongs to no
// church: its envelope carries an empty church_id.
type WebhookEndpointAutoDisabled struct {
	WebhookEndpointID string `json:"webhook_endpoint_id" jsonschema:"pattern=^we_[0-9A-Za-z]{27}$"`
	Reason            string `json:"reason" jsonschema:"enum=failing" jsonschema_description:"failing: every delivery attempt to the endpoint failed for the configured span (5 days by default)."`
}

// WebhookEndpointPaused is the internal webhook_endpoint.paused event: the
// partner disabled the endpoint (POST /v1/webhook_endpoints/{id}/disable).
// It emits nothing public; the partner knows what it did.
type WebhookEndpointPaused struct{}

// WebhookEndpointReenabled is the internal webhook_endpoint.enabled event:
// the endpoint receives new events again. What happened while it was
// disabled is not replayed (recover does that).
type WebhookEndpointReenabled struct{}

func (*WebhookEndpointCreated) EventType() string      { return "webhook_endpoint.created" }
func (*WebhookEndpointDeleted) EventType() string      { return "webhook_endpoint.deleted" }
func (*WebhookEndpointTested) EventType() string       { return WebhookTestEventType }
func (*WebhookEndpointAutoDisabled) EventType() string { return "webhook_endpoint.disabled" }
func (*WebhookEndpointPaused) EventType() string       { return "webhook_endpoint.paused" }
func (*WebhookEndpointReenabled) EventType() string    { return "webhook_endpoint.enabled" }

func init() {
	register[WebhookEndpointCreated](false, "A partner registered a webhook endpoint.")
	register[WebhookEndpointDeleted](false, "A partner deleted a webhook endpoint.")
	register[WebhookEndpointAutoDisabled](true, "The service disabled a webhook endpoint whose every delivery attempt failed for the configured span. Sent to the partner's other endpoints and on the feed; the disabled endpoint receives nothing until it is enabled.")
	register[WebhookEndpointPaused](false, "A partner disabled a webhook endpoint.")
	register[WebhookEndpointReenabled](false, "A webhook endpoint was enabled again.")
	registerTestOnly[WebhookEndpointTested]("A test delivery requested with POST /v1/webhook_endpoints/{id}/test. Sent only to that endpoint, never on the feed.")
}

// WebhookEndpoint is the webhook endpoint aggregate.
type WebhookEndpoint struct {
	ID           string    `json:"id"`
	PartnerID    string    `json:"partner_id"`
	URL          string    `json:"url"`
	EventTypes   []string  `json:"event_types"`
	SealedSecret []byte    `json:"sealed_secret"`
	CreatedAt    time.Time `json:"created_at"`
	Deleted      bool      `json:"deleted,omitempty"`
	// DisabledReason is why the endpoint is disabled (DisabledManual or
	// DisabledFailing); empty while it is enabled.
	DisabledReason string `json:"disabled_reason,omitempty"`
}

// The status of an endpoint that exists; a deleted endpoint is gone.
const (
	WebhookEndpointEnabled  = "enabled"
	WebhookEndpointDisabled = "disabled"
)

// Why an endpoint is disabled.
const (
	// DisabledManual: the partner disabled it.
	DisabledManual = "manual"
	// DisabledFailing: every attempt failed for the configured span.
	DisabledFailing = "failing"
)

// Exists reports whether the endpoint was created and not deleted.
func (e *WebhookEndpoint) Exists() bool { return e.ID != "" && !e.Deleted }

// Status is enabled or disabled.
func (e *WebhookEndpoint) Status() string {
	if e.DisabledReason != "" {
		return WebhookEndpointDisabled
	}
	return WebhookEndpointEnabled
}

// Enabled reports whether the endpoint receives new events.
func (e *WebhookEndpoint) Enabled() bool { return e.DisabledReason == "" }

// Apply folds one of the endpoint's events into its state.
func (e *WebhookEndpoint) Apply(ev Event) {
	switch p := ev.Payload.(type) {
	case *WebhookEndpointCreated:
		e.ID, e.PartnerID, e.URL, e.EventTypes = ev.AggregateID, ev.PartnerID, p.URL, p.EventTypes
		e.SealedSecret, e.CreatedAt = p.SealedSecret, ev.OccurredAt
	case *WebhookEndpointDeleted:
		e.Deleted = true
	case *WebhookEndpointAutoDisabled:
		e.DisabledReason = p.Reason
	case *WebhookEndpointPaused:
		e.DisabledReason = DisabledManual
	case *WebhookEndpointReenabled:
		e.DisabledReason = ""
	}
}

// Subscribes reports whether the endpoint wants events of type t.
func (e *WebhookEndpoint) Subscribes(t string) bool {
	return slices.Contains(e.EventTypes, AllEventTypes) || slices.Contains(e.EventTypes, t)
}

// NewWebhookEndpoint is what creating an endpoint needs.
type NewWebhookEndpoint struct {
	ID           string
	PartnerID    string
	URL          string
	EventTypes   []string
	SealedSecret []byte
}

// ValidateWebhookEndpoint checks the shape of a receiver address and a
// subscription and returns them normalised: the url trimmed, the event types
// without repeats, in the order given. Whether the address may be reached
// (scheme and network policy of the stack) is for the dispatcher to judge.
func ValidateWebhookEndpoint(rawURL string, eventTypes []string) (string, []string, error) {
	var v Validation
	u := strings.TrimSpace(rawURL)
	if detail := webhookURLProblem(u); detail != "" {
		v.Add("url", "%s", detail)
	}
	types, detail := normalizeEventTypes(eventTypes)
	if detail != "" {
		v.Add("event_types", "%s", detail)
	}
	return u, types, v.Err()
}

func webhookURLProblem(s string) string {
	if s == "" {
		return "is required: the absolute https address of your receiver"
	}
	if len(s) > MaxWebhookURL {
		return "must be at most 2048 characters"
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "must not contain spaces or control characters"
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "must be an absolute address such as https://example.org/webhooks"
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "must use https"
	case u.User != nil:
		return "must not contain credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not contain a fragment"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "0") {
			return "must have a port from 1 to 65535"
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "must have a port from 1 to 65535"
	}
	return ""
}

func normalizeEventTypes(types []string) ([]string, string) {
	if len(types) == 0 {
		return nil, `must list at least one event type, or "*" for all`
	}
	if len(types) > MaxWebhookEventTypes {
		return nil, "must list at most 32 event types"
	}
	known := PublicEventTypes()
	out := make([]string, 0, len(types))
	for _, t := range types {
		if t != AllEventTypes && !slices.Contains(known, t) {
			return nil, "unknown event type " + quote(t) + `; use "*" or one of: ` + strings.Join(known, ", ")
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, ""
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s) + `"`
}

// CreateWebhookEndpoint decides registering an endpoint.
func CreateWebhookEndpoint(e *WebhookEndpoint, n NewWebhookEndpoint, now time.Time) (Event, error) {
	if e.ID != "" {
		return Event{}, ProblemConflict.New("Webhook endpoint %s already exists.", n.ID)
	}
	u, types, err := ValidateWebhookEndpoint(n.URL, n.EventTypes)
	if err != nil {
		return Event{}, err
	}
	if len(n.SealedSecret) == 0 {
		return Event{}, ProblemInternal.New("webhook endpoint %s: no sealed secret", n.ID)
	}
	return NewEvent(n.PartnerID, n.ID, "", now, &WebhookEndpointCreated{URL: u, EventTypes: types, SealedSecret: n.SealedSecret}), nil
}

// DeleteWebhookEndpoint decides deleting an endpoint. Deleting one that does
// not exist, or no longer does, is not found.
func DeleteWebhookEndpoint(e *WebhookEndpoint, id string, now time.Time) (Event, error) {
	if !e.Exists() {
		return Event{}, NotFound("webhook endpoint", id)
	}
	return NewEvent(e.PartnerID, e.ID, "", now, &WebhookEndpointDeleted{}), nil
}

// DisableWebhookEndpoint decides the partner's disabling of an endpoint.
// Disabling a disabled endpoint changes nothing (nil event), whatever the
// reason it was disabled for.
func DisableWebhookEndpoint(e *WebhookEndpoint, id string, now time.Time) (*Event, error) {
	if !e.Exists() {
		return nil, NotFound("webhook endpoint", id)
	}
	if !e.Enabled() {
		return nil, nil
	}
	ev := NewEvent(e.PartnerID, e.ID, "", now, &WebhookEndpointPaused{})
	return &ev, nil
}

// FailWebhookEndpoint decides the service's disabling of an endpoint whose
// attempts all failed for the configured span: the public
// webhook_endpoint.disabled event. An endpoint already disabled, or
// deleted, is left as it is (nil event).
func FailWebhookEndpoint(e *WebhookEndpoint, now time.Time) *Event {
	if !e.Exists() || !e.Enabled() {
		return nil
	}
	ev := NewEvent(e.PartnerID, e.ID, "", now, &WebhookEndpointAutoDisabled{WebhookEndpointID: e.ID, Reason: DisabledFailing})
	return &ev
}

// EnableWebhookEndpoint decides enabling an endpoint. Enabling an enabled
// endpoint changes nothing (nil event).
func EnableWebhookEndpoint(e *WebhookEndpoint, id string, now time.Time) (*Event, error) {
	if !e.Exists() {
		return nil, NotFound("webhook endpoint", id)
	}
	if e.Enabled() {
		return nil, nil
	}
	ev := NewEvent(e.PartnerID, e.ID, "", now, &WebhookEndpointReenabled{})
	return &ev, nil
}

// GenerateWebhookSecret returns a fresh signing secret: the whsec_ prefix and
// 32 random bytes in standard, padded base64, the form the Standard Webhooks
// libraries read. The whole string, prefix included, is the
// Service-Signature HMAC key; the decoded bytes are the Standard Webhooks
// key (StandardKey).
func GenerateWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	if _, err := rand.Read(b); err != nil {
		panic("domain: crypto/rand failed: " + err.Error())
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// DeliveryOutcome is how one delivery attempt ended.
type DeliveryOutcome string

// The outcomes of a delivery attempt.
const (
	// DeliverySucceeded: the receiver answered 2xx.
	DeliverySucceeded DeliveryOutcome = "succeeded"
	// DeliveryFailed: the receiver answered something other than 2xx.
	DeliveryFailed DeliveryOutcome = "failed"
	// DeliveryTimeout: no complete answer within the per-attempt timeout.
	DeliveryTimeout DeliveryOutcome = "timeout"
	// DeliveryNetworkError: no answer at all (refused connection, DNS, TLS,
	// or an address the stack may not connect to).
	DeliveryNetworkError DeliveryOutcome = "network_error"
)

// DeliveryAttempt is one try at delivering one event to one endpoint. It is
// an operational record, not a ledger event: it lives in the attempt log.
type DeliveryAttempt struct {
	ID         string          `json:"id"`
	EndpointID string          `json:"endpoint_id"`
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	Attempt    int             `json:"attempt"`
	Outcome    DeliveryOutcome `json:"outcome"`
	// StatusCode is the receiver's HTTP status, 0 when it gave none.
	StatusCode  int           `json:"status_code,omitempty"`
	Duration    time.Duration `json:"duration"`
	AttemptedAt time.Time     `json:"attempted_at"`
	// NextAttemptAt is when the delivery will be tried again; nil when it
	// succeeded, was a test, or is exhausted.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Exhausted marks the last attempt of a delivery that never succeeded.
	Exhausted bool `json:"exhausted,omitempty"`
	// Error says briefly why the attempt failed; empty on success.
	Error string `json:"error,omitempty"`
	// FailingSince is when the endpoint's current run of failed attempts
	// began (this attempt's time for the first of them); nil on success.
	FailingSince *time.Time `json:"failing_since,omitempty"`
}

// FailingSince is when the endpoint's run of failures began, given its
// previous attempt (nil when it has none) and this attempt: nil on success,
// the previous run's start when that attempt failed too, else now.
func FailingSince(prev *DeliveryAttempt, outcome DeliveryOutcome, now time.Time) *time.Time {
	if outcome == DeliverySucceeded {
		return nil
	}
	if prev != nil && prev.FailingSince != nil {
		since := *prev.FailingSince
		return &since
	}
	now = now.UTC()
	return &now
}
