package domain

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Webhook endpoints: where a partner wants its events pushed.
//
// An endpoint is its own aggregate (id we_...), created and deleted by the
// partner. Its signing secret is generated at creation, shown once, and
// reaches the ledger only sealed: the domain sees opaque bytes, never the
// plaintext. An endpoint's secret is rotated in place: the new one signs
// every delivery from the rotation on, and the previous one signs beside it
// until it expires, so receivers can move to the new one without a
// delivery going unverified. An endpoint signed with ed25519 also holds a
// key pair: its private key sealed like the secret, its public key shown.

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
	// MaxWebhookDescription bounds an endpoint's description, in characters.
	MaxWebhookDescription = 500
	// The limits of an endpoint's metadata, Stripe's: keys, characters of
	// a key, characters of a value.
	MaxMetadataKeys  = 50
	MaxMetadataKey   = 40
	MaxMetadataValue = 500
	// DefaultSecretOverlap is how long a rotated secret keeps signing when
	// the partner does not say.
	DefaultSecretOverlap = 24 * time.Hour
)

// The signature schemes of an endpoint's Standard Webhooks header. Either
// way Service-Signature is HMAC-SHA256 with the endpoint's whsec_ secret,
// as the spec requires.
const (
	// SchemeHMAC signs webhook-signature with the whsec_ secret (v1).
	SchemeHMAC = "hmac_sha256"
	// SchemeEd25519 signs webhook-signature with the endpoint's ed25519
	// private key (v1a); receivers verify with its whpk_ public key and
	// hold no shared secret for that header.
	SchemeEd25519 = "ed25519"
)

// The Standard Webhooks serialisations of an ed25519 key pair: base64 of
// the key, after a prefix naming what it is.
const (
	PublicKeyPrefix  = "whpk_"
	SigningKeyPrefix = "whsk_"
)

// WebhookEndpointCreated is the internal webhook_endpoint.created event. The
// endpoint id is the aggregate id. SealedSecret is the signing secret
// encrypted by the layer above; the ledger never holds the plaintext.
type WebhookEndpointCreated struct {
	URL          string   `json:"url"`
	EventTypes   []string `json:"event_types"`
	SealedSecret []byte   `json:"sealed_secret"`
	// Description and Metadata are the partner's own notes.
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// SigningKey is the endpoint's ed25519 key pair, when it signs with
	// SchemeEd25519.
	SigningKey *SealedSigningKey `json:"signing_key,omitempty"`
}

// SealedSigningKey is an endpoint's ed25519 key pair as the ledger holds
// it: the whsk_ private key sealed by the layer above, the whpk_ public
// key in the clear (it is shown to the partner at any time).
type SealedSigningKey struct {
	Sealed    []byte `json:"sealed"`
	PublicKey string `json:"public_key"`
}

// WebhookEndpointUpdated is the internal webhook_endpoint.updated event: the
// partner changed some of the endpoint's settings. Each field set is the
// new value; an absent one is unchanged. It carries no secret: a change to
// SchemeEd25519 carries the new key pair, its private key sealed.
type WebhookEndpointUpdated struct {
	URL         string             `json:"url,omitempty"`
	EventTypes  []string           `json:"event_types,omitempty"`
	Description *string            `json:"description,omitempty"`
	Metadata    *map[string]string `json:"metadata,omitempty"`
	Scheme      string             `json:"signature_scheme,omitempty"`
	SigningKey  *SealedSigningKey  `json:"signing_key,omitempty"`
}

// WebhookSecretIssued is the internal webhook_endpoint.secret_issued fact a
// rotation records: the new sealed secret (and key pair, for an ed25519
// endpoint), and until when the one it replaces keeps signing. It travels
// inside the public webhook_endpoint.secret_rotated event, never in its
// envelope.
type WebhookSecretIssued struct {
	SealedSecret      []byte            `json:"sealed_secret"`
	SigningKey        *SealedSigningKey `json:"signing_key,omitempty"`
	PreviousExpiresAt time.Time         `json:"previous_expires_at"`
}

// WebhookSecretRotated is the public webhook_endpoint.secret_rotated event:
// the partner rotated an endpoint's secret. It goes to the partner's other
// endpoints (never the rotated one) and the feed, so whoever looks after the
// other receivers learns of it; it names no secret.
type WebhookSecretRotated struct {
	WebhookEndpointID string `json:"webhook_endpoint_id" jsonschema:"pattern=^we_[0-9A-Za-z]{27}$"`
	PreviousExpiresAt string `json:"previous_expires_at" jsonschema:"pattern=^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$" jsonschema_description:"Until when the previous secret (and key pair) keeps signing deliveries beside the new one (ISO 8601 UTC). Equal to occurred_at when it expired at once."`
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
func (*WebhookEndpointUpdated) EventType() string      { return "webhook_endpoint.updated" }
func (*WebhookSecretIssued) EventType() string         { return "webhook_endpoint.secret_issued" }
func (*WebhookSecretRotated) EventType() string        { return "webhook_endpoint.secret_rotated" }

func init() {
	register[WebhookEndpointCreated](false, "A partner registered a webhook endpoint.")
	register[WebhookEndpointDeleted](false, "A partner deleted a webhook endpoint.")
	register[WebhookEndpointAutoDisabled](true, "The service disabled a webhook endpoint whose every delivery attempt failed for the configured span. Sent to the partner's other endpoints and on the feed; the disabled endpoint receives nothing until it is enabled.")
	register[WebhookEndpointPaused](false, "A partner disabled a webhook endpoint.")
	register[WebhookEndpointReenabled](false, "A webhook endpoint was enabled again.")
	register[WebhookEndpointUpdated](false, "A partner changed a webhook endpoint's address, event types, description, metadata or signature scheme.")
	register[WebhookSecretIssued](false, "A webhook endpoint's signing secret was replaced; the previous one signs beside it until it expires.")
	register[WebhookSecretRotated](true, "A partner rotated a webhook endpoint's signing secret (POST /v1/webhook_endpoints/{id}/rotate_secret). Until previous_expires_at every delivery to that endpoint is signed with both the new and the previous secret. Sent to the partner's other endpoints and on the feed; it names no secret.")
	registerCarrying("webhook_endpoint.secret_rotated", "webhook_endpoint.secret_issued")
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
	DisabledReason string            `json:"disabled_reason,omitempty"`
	Description    string            `json:"description,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Scheme is SchemeEd25519, or empty for SchemeHMAC.
	Scheme     string            `json:"signature_scheme,omitempty"`
	SigningKey *SealedSigningKey `json:"signing_key,omitempty"`
	// Previous is the secret (and key pair) a rotation replaced, which
	// signs beside the current one until it expires; nil when none does.
	Previous *PreviousSecret `json:"previous,omitempty"`
}

// PreviousSecret is a replaced secret that still signs until ExpiresAt.
type PreviousSecret struct {
	SealedSecret []byte            `json:"sealed_secret"`
	SigningKey   *SealedSigningKey `json:"signing_key,omitempty"`
	ExpiresAt    time.Time         `json:"expires_at"`
}

// SignatureScheme is the endpoint's scheme for webhook-signature.
func (e *WebhookEndpoint) SignatureScheme() string {
	if e.Scheme == "" {
		return SchemeHMAC
	}
	return e.Scheme
}

// PreviousUntil is until when the replaced secret signs beside the current
// one at now; zero when none does any more.
func (e *WebhookEndpoint) PreviousUntil(now time.Time) time.Time {
	if e.Previous == nil || !now.Before(e.Previous.ExpiresAt) {
		return time.Time{}
	}
	return e.Previous.ExpiresAt
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
		e.Description, e.Metadata, e.SigningKey = p.Description, p.Metadata, p.SigningKey
		if p.SigningKey != nil {
			e.Scheme = SchemeEd25519
		}
	case *WebhookEndpointUpdated:
		e.applyUpdate(p)
	case *WebhookSecretIssued:
		e.Previous = &PreviousSecret{SealedSecret: e.SealedSecret, SigningKey: e.SigningKey, ExpiresAt: p.PreviousExpiresAt}
		e.SealedSecret, e.SigningKey = p.SealedSecret, p.SigningKey
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

func (e *WebhookEndpoint) applyUpdate(p *WebhookEndpointUpdated) {
	if p.URL != "" {
		e.URL = p.URL
	}
	if p.EventTypes != nil {
		e.EventTypes = p.EventTypes
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	if p.Metadata != nil {
		e.Metadata = *p.Metadata
	}
	switch p.Scheme {
	case SchemeHMAC:
		e.Scheme, e.SigningKey = "", nil
	case SchemeEd25519:
		e.Scheme, e.SigningKey = SchemeEd25519, p.SigningKey
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
	Description  string
	Metadata     map[string]string
	// SigningKey is set for an endpoint that signs with SchemeEd25519.
	SigningKey *SealedSigningKey
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
	var v Validation
	validateNotes(&v, &n.Description, n.Metadata)
	if err := v.Err(); err != nil {
		return Event{}, err
	}
	if len(n.SealedSecret) == 0 {
		return Event{}, ProblemInternal.New("webhook endpoint %s: no sealed secret", n.ID)
	}
	return NewEvent(n.PartnerID, n.ID, "", now, &WebhookEndpointCreated{
		URL: u, EventTypes: types, SealedSecret: n.SealedSecret, Description: n.Description,
		Metadata: nonEmpty(n.Metadata), SigningKey: n.SigningKey,
	}), nil
}

// ValidateSignatureScheme checks a requested signature scheme.
func ValidateSignatureScheme(s string) error {
	if s != SchemeHMAC && s != SchemeEd25519 {
		var v Validation
		v.Add("signature_scheme", "must be %s or %s", SchemeHMAC, SchemeEd25519)
		return v.Err()
	}
	return nil
}

// validateNotes checks an endpoint's description (trimmed in place) and
// metadata against their limits.
func validateNotes(v *Validation, description *string, metadata map[string]string) {
	*description = strings.TrimSpace(*description)
	if utf8.RuneCountInString(*description) > MaxWebhookDescription || !utf8.ValidString(*description) {
		v.Add("description", "must be at most %d characters of valid UTF-8", MaxWebhookDescription)
	}
	if len(metadata) > MaxMetadataKeys {
		v.Add("metadata", "must hold at most %d keys", MaxMetadataKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		if k == "" || utf8.RuneCountInString(k) > MaxMetadataKey || strings.ContainsFunc(k, unicode.IsControl) {
			v.Add("metadata", "key %s: must be 1 to %d characters, none of them control characters", quote(k), MaxMetadataKey)
		}
		if utf8.RuneCountInString(metadata[k]) > MaxMetadataValue {
			v.Add("metadata", "value of %s: must be at most %d characters", quote(k), MaxMetadataValue)
		}
	}
}

// nonEmpty is m without its empty values, nil when nothing is left: an
// empty value unsets a key, as in Stripe's metadata.
func nonEmpty(m map[string]string) map[string]string {
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(_, v string) bool { return v == "" })
	if len(out) == 0 {
		return nil
	}
	return out
}

// WebhookEndpointChange is what a partner asks to change of an endpoint;
// nil fields are left as they are. Metadata is merged into the endpoint's:
// a key with an empty value is removed. SigningKey is the new key pair
// when the scheme becomes SchemeEd25519 (made by the layer above, which
// seals it).
type WebhookEndpointChange struct {
	URL         *string
	EventTypes  *[]string
	Description *string
	Metadata    map[string]string
	Scheme      *string
	SigningKey  *SealedSigningKey
}

// UpdateWebhookEndpoint decides a change of an endpoint's settings. A
// change that changes nothing appends nothing (nil event).
func UpdateWebhookEndpoint(e *WebhookEndpoint, id string, c WebhookEndpointChange, now time.Time) (*Event, error) {
	if !e.Exists() {
		return nil, NotFound("webhook endpoint", id)
	}
	var v Validation
	var p WebhookEndpointUpdated
	if c.URL != nil {
		u := strings.TrimSpace(*c.URL)
		if detail := webhookURLProblem(u); detail != "" {
			v.Add("url", "%s", detail)
		} else if u != e.URL {
			p.URL = u
		}
	}
	if c.EventTypes != nil {
		types, detail := normalizeEventTypes(*c.EventTypes)
		if detail != "" {
			v.Add("event_types", "%s", detail)
		} else if !slices.Equal(types, e.EventTypes) {
			p.EventTypes = types
		}
	}
	description := e.Description
	if c.Description != nil {
		description = *c.Description
	}
	metadata := maps.Clone(e.Metadata)
	if c.Metadata != nil {
		if metadata == nil {
			metadata = map[string]string{}
		}
		maps.Copy(metadata, c.Metadata)
		metadata = nonEmpty(metadata)
	}
	validateNotes(&v, &description, metadata)
	if c.Scheme != nil {
		if err := ValidateSignatureScheme(*c.Scheme); err != nil {
			v.Add("signature_scheme", "must be %s or %s", SchemeHMAC, SchemeEd25519)
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if description != e.Description {
		p.Description = &description
	}
	if !maps.Equal(metadata, e.Metadata) {
		if metadata == nil {
			// Recorded as {}, not null, which would read back as unchanged.
			metadata = map[string]string{}
		}
		p.Metadata = &metadata
	}
	if c.Scheme != nil && *c.Scheme != e.SignatureScheme() {
		p.Scheme = *c.Scheme
		if p.Scheme == SchemeEd25519 {
			if c.SigningKey == nil {
				return nil, ProblemInternal.New("webhook endpoint %s: no signing key for ed25519", id)
			}
			p.SigningKey = c.SigningKey
		}
	}
	if p.URL == "" && p.EventTypes == nil && p.Description == nil && p.Metadata == nil && p.Scheme == "" {
		return nil, nil
	}
	ev := NewEvent(e.PartnerID, e.ID, "", now, &p)
	return &ev, nil
}

// MaxOverlap is the longest a rotated webhook secret keeps signing, or a
// rolled API key keeps working, beside its successor (Stripe's longest
// overlap for a rolled key).
const MaxOverlap = 7 * 24 * time.Hour

// ValidateOverlap checks an expire_current_in, in seconds: how long the
// current secret or key keeps working beside its successor.
func ValidateOverlap(seconds int64) (time.Duration, error) {
	if seconds < 0 || seconds > int64(MaxOverlap/time.Second) {
		return 0, errOverlap()
	}
	return time.Duration(seconds) * time.Second, nil
}

func errOverlap() error {
	var v Validation
	v.Add("expire_current_in", "must be 0 to %d seconds (7 days)", int64(MaxOverlap/time.Second))
	return v.Err()
}

// RotateWebhookSecret decides replacing an endpoint's secret (and key pair,
// for an ed25519 endpoint) with a new one, the current one signing beside
// it for overlap: the public webhook_endpoint.secret_rotated carrying the
// new sealed secret. A secret still in its overlap from an earlier
// rotation stops signing at once: only the two newest ever sign.
func RotateWebhookSecret(e *WebhookEndpoint, id string, sealed []byte, key *SealedSigningKey, overlap time.Duration, now time.Time) (Event, error) {
	if !e.Exists() {
		return Event{}, NotFound("webhook endpoint", id)
	}
	if len(sealed) == 0 || (e.SignatureScheme() == SchemeEd25519) != (key != nil) {
		return Event{}, ProblemInternal.New("webhook endpoint %s: rotation without the credentials of its scheme", id)
	}
	ev := NewEvent(e.PartnerID, e.ID, "", now, &WebhookSecretRotated{WebhookEndpointID: e.ID})
	expires := ev.OccurredAt.Add(overlap)
	ev.Payload.(*WebhookSecretRotated).PreviousExpiresAt = FormatTime(expires)
	ev.Internal = &WebhookSecretIssued{SealedSecret: sealed, SigningKey: key, PreviousExpiresAt: expires}
	return ev, nil
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

// GenerateSigningKey returns a fresh ed25519 key pair in the Standard
// Webhooks serialisations: the whsk_ private key (base64 of Go's 64-byte
// private key, seed and public key) and the whpk_ public key (base64 of the
// 32-byte key).
func GenerateSigningKey() (private, public string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic("domain: crypto/rand failed: " + err.Error())
	}
	return SigningKeyPrefix + base64.StdEncoding.EncodeToString(priv), PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParseSigningKey reads a whsk_ private key.
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SigningKeyPrefix))
	if err != nil || !strings.HasPrefix(s, SigningKeyPrefix) || len(b) != ed25519.PrivateKeySize {
		return nil, ProblemInternal.New("not a whsk_ ed25519 private key")
	}
	return ed25519.PrivateKey(b), nil
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
// ResponseKept is how much of a receiver's answer body an attempt keeps,
// for the partner to see what its receiver said.
const ResponseKept = 1024

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
	// Response is the first bytes of the receiver's answer body (at most
	// ResponseKept), as text; empty when it answered none.
	Response string `json:"response,omitempty"`
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
