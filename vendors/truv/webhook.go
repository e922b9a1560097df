package truv

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Truv's webhook headers (Webhooks → Webhook payload structure → Headers,
// docs.truv.com/api-reference/webhooks).
const (
	// SignatureHeader carries "v1=" and the lowercase hex HMAC-SHA256 of the
	// raw request body keyed with the access secret. Header names are
	// case-insensitive; Truv's page writes it X-WEBHOOK-SIGN.
	SignatureHeader = "X-Webhook-Sign"
	// UserAgent is the User-Agent Truv's webhook service sends.
	UserAgent = "Truv-Webhook-Service/2.0"
	// signaturePrefix is the scheme version in front of the hex digest.
	signaturePrefix = "v1="
)

// ErrBadSignature matches every webhook refused for its signature or its
// age; errors.As on *SignatureError says which.
var ErrBadSignature = errors.New("truv: bad webhook signature")

// Why a webhook was refused.
const (
	ReasonMissing   = "missing"   // no X-Webhook-Sign header
	ReasonMalformed = "malformed" // not "v1=" and 64 hex digits
	ReasonMismatch  = "mismatch"  // no configured secret produces it
	ReasonStale     = "stale"     // signed, but event_created_at is older than MaxAge
)

// SignatureError is a webhook refused before its content was trusted.
type SignatureError struct {
	Reason string
	Detail string
}

func (e *SignatureError) Error() string {
	if e.Detail == "" {
		return "truv webhook: signature " + e.Reason
	}
	return "truv webhook: signature " + e.Reason + ": " + e.Detail
}

// Is makes errors.Is(err, ErrBadSignature) hold.
func (e *SignatureError) Is(target error) bool { return target == ErrBadSignature }

// Verifier checks Truv's webhook signature exactly as Truv documents it:
// HMAC-SHA256 over the raw request body, keyed with the access secret,
// hex-encoded, prefixed "v1=", in X-WEBHOOK-SIGN, compared in constant time.
//
// Truv signs no timestamp, so the signature alone cannot refuse a replay.
// Two things stand in for that: the edge deduplicates on the event's
// webhook_id, and MaxAge, when set, refuses an event whose signed
// event_created_at is older than that. MaxAge is the service's policy, not
// Truv's: Truv does not say how long it retries a delivery, so keep MaxAge
// well above any retry window, or zero to leave age to deduplication.
type Verifier struct {
	// Secrets are the access secrets to accept: the current one first, and
	// the previous one during a rotation.
	Secrets []string
	// MaxAge, when positive, bounds the age of event_created_at.
	MaxAge time.Duration
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
}

// Verify checks a webhook's signature (and age, when MaxAge is set) on its
// raw body, before anything in the body is trusted. It returns a
// *SignatureError on refusal.
func (v Verifier) Verify(h http.Header, body []byte) error {
	got := h.Get(SignatureHeader)
	if got == "" {
		return &SignatureError{Reason: ReasonMissing}
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(got), signaturePrefix)
	if !ok || len(hexSig) != sha256.Size*2 {
		return &SignatureError{Reason: ReasonMalformed, Detail: `want "v1=" and 64 hex digits`}
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil {
		return &SignatureError{Reason: ReasonMalformed, Detail: "not hex"}
	}
	matched := false
	for _, s := range v.Secrets {
		if s != "" && hmac.Equal(sig, mac(s, body)) {
			matched = true
		}
	}
	if !matched {
		return &SignatureError{Reason: ReasonMismatch}
	}
	if v.MaxAge > 0 {
		return v.checkAge(body)
	}
	return nil
}

// checkAge reads the signed event_created_at and refuses it when older than
// MaxAge (or further than MaxAge in the future: a clock that far off is as
// suspicious as a replay).
func (v Verifier) checkAge(body []byte) error {
	var e struct {
		CreatedAt string `json:"event_created_at"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return &SignatureError{Reason: ReasonStale, Detail: "event_created_at unreadable"}
	}
	at, err := parseTime(e.CreatedAt)
	if err != nil {
		return &SignatureError{Reason: ReasonStale, Detail: err.Error()}
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if age := now().Sub(at); age > v.MaxAge || age < -v.MaxAge {
		return &SignatureError{Reason: ReasonStale, Detail: fmt.Sprintf("event_created_at is %s away, more than %s", age.Round(time.Second), v.MaxAge)}
	}
	return nil
}

// Sign returns the headers Truv sends with a webhook body: the signature,
// the JSON content type, and Truv's User-Agent. The sandbox's stand-in Truv
// and the simulators use it, so their webhooks cross the production edge
// exactly as Truv's do.
func Sign(secret string, body []byte) http.Header {
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(SignatureHeader, signaturePrefix+hex.EncodeToString(mac(secret, body)))
	return h
}

func mac(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}
