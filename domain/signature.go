package domain

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SignatureTolerance is how far a signature's timestamp may be from now.
const SignatureTolerance = 300 * time.Second

// The headers that carry a delivery's signature, made by WebhookSigner.
const (
	// WebhookSignatureHeader signs the service's deliveries to partners.
	WebhookSignatureHeader = "Service-Signature"
	// WebhookAttemptHeader numbers a delivery's attempt, from 1; a resend
	// or a recovery is attempt 1 of a new delivery.
	WebhookAttemptHeader = "Service-Webhook-Attempt"
)

// WebhookUserAgent names the service on every delivery, and on the events
// `giving listen` forwards like deliveries.
const WebhookUserAgent = "PartnerGiving-Webhooks/1.0"

// The Standard Webhooks headers (standardwebhooks.com), sent on every
// delivery beside Service-Signature so that the official libraries verify
// it.
const (
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// serviceSignature writes a Service-Signature value from its timestamp and
// HMAC: "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", keyed with
// the whole secret as given (an endpoint's "whsec_..." string, prefix
// included), the form VerifySignature reads.
func serviceSignature(ts string, sum []byte) string {
	return "t=" + ts + ",v1=" + hex.EncodeToString(sum)
}

// WebhookSigner makes a delivery's signature headers, its keys derived and
// made ready once: for a sender that signs many deliveries to one
// endpoint. It is the one signer of real, test, resent and recovered
// deliveries. It is safe for concurrent use.
//
// During a rotation's overlap it signs with the previous secret too:
// Service-Signature is sent twice, one field line per secret, each exactly
// "t=<unix>,v1=<hex>" as the spec's rule 1 requires (the previous
// secret's line first, so a receiver that reads only the first line keeps
// verifying with the secret it holds until that one expires); the Standard
// Webhooks webhook-signature lists both signatures, the new first, space
// separated, as that spec provides for rotation.
type WebhookSigner struct {
	current, previous signingKeys
	// until is when the previous keys stop signing; zero when there are
	// none.
	until time.Time
}

// signingKeys are one generation of an endpoint's keys.
type signingKeys struct {
	secret, standard macKey
	// ed signs webhook-signature (v1a) instead of standard, for an
	// endpoint signed with ed25519.
	ed ed25519.PrivateKey
}

// NewWebhookSigner derives the keys of secret.
func NewWebhookSigner(secret string) WebhookSigner {
	return WebhookSigner{current: signingKeys{secret: readyMACKey([]byte(secret)), standard: readyMACKey(StandardKey(secret))}}
}

// WithSigningKey is s with webhook-signature made by an ed25519 private key
// (Standard Webhooks v1a) instead of the secret's HMAC.
func (s WebhookSigner) WithSigningKey(key ed25519.PrivateKey) WebhookSigner {
	s.current.ed = key
	return s
}

// WithPrevious is s signing with previous's keys as well, at every time
// before until.
func (s WebhookSigner) WithPrevious(previous WebhookSigner, until time.Time) WebhookSigner {
	s.previous, s.until = previous.current, until
	return s
}

// Headers hands add, one by one, a delivery attempt's headers: one
// Service-Signature per secret that signs at t, the Standard Webhooks set,
// and the attempt's number.
func (s WebhookSigner) Headers(id string, attempt int, t time.Time, body []byte, add func(k, v string)) {
	ts := strconv.FormatInt(t.Unix(), 10)
	overlap := t.Before(s.until)
	if overlap {
		add(WebhookSignatureHeader, serviceSignature(ts, s.previous.secret.sum(ts, body)))
	}
	add(WebhookSignatureHeader, serviceSignature(ts, s.current.secret.sum(ts, body)))
	add(StandardIDHeader, id)
	add(StandardTimestampHeader, ts)
	standard := s.current.standardSignature(id, ts, body)
	if overlap {
		standard += " " + s.previous.standardSignature(id, ts, body)
	}
	add(StandardSignatureHeader, standard)
	add(WebhookAttemptHeader, strconv.Itoa(attempt))
}

// standardSignature is webhook-signature's entry for these keys: v1a by
// the ed25519 key when there is one, else v1 by the HMAC key.
func (k signingKeys) standardSignature(id, ts string, body []byte) string {
	if k.ed == nil {
		return standardSignature(k.standard.sum(id+"."+ts, body))
	}
	msg := make([]byte, 0, len(id)+len(ts)+2+len(body))
	msg = append(append(append(append(append(msg, id...), '.'), ts...), '.'), body...)
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(k.ed, msg))
}

// macKey is an HMAC-SHA256 key. A ready one holds the hash state of its
// padded key, computed once, and each signature starts from a copy of it:
// a delivery's two signatures no longer set up two HMACs from their keys
// (four hash blocks and five allocations), which was a tenth of a burst's
// delivery cost outside HTTP.
type macKey struct {
	key []byte
	// ready is the keyed state, nil when the hash cannot be copied (then
	// each signature starts from the key).
	ready hash.Cloner
}

func readyMACKey(key []byte) macKey {
	m := hmac.New(sha256.New, key)
	// crypto/hmac keeps the padded key's state once reset (FIPS 198-1
	// allows precomputing it).
	m.Reset()
	ready, _ := m.(hash.Cloner)
	return macKey{key: key, ready: ready}
}

// sum returns the HMAC of "<prefix>.<body>".
func (k macKey) sum(prefix string, body []byte) []byte {
	var m hash.Hash
	if k.ready != nil {
		if c, err := k.ready.Clone(); err == nil {
			m = c
		}
	}
	if m == nil {
		m = hmac.New(sha256.New, k.key)
	}
	m.Write([]byte(prefix))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

func standardSignature(sum []byte) string { return "v1," + base64.StdEncoding.EncodeToString(sum) }

// StandardKey is the HMAC key the Standard Webhooks scheme derives from a
// secret: the base64 decoding of what follows "whsec_". Secrets issued
// before that scheme was added are unpadded base64url, which the official
// libraries do not read; their key is their base64url decoding, and
// Service-Signature verifies them as before.
func StandardKey(secret string) []byte {
	rest := strings.TrimPrefix(secret, WebhookSecretPrefix)
	if b, err := base64.StdEncoding.DecodeString(rest); err == nil {
		return b
	}
	if b, err := base64.RawURLEncoding.DecodeString(rest); err == nil {
		return b
	}
	return []byte(rest)
}

var signatureForm = regexp.MustCompile(`^t=([0-9]{1,12}),v1=([0-9a-f]{64})$`)

// ErrBadSignature means a signature header is missing, malformed, stale or
// does not match the body. VerifySignature wraps it with the reason, for the
// operator's log; the sender is told only this.
var ErrBadSignature = ProblemInvalidSignature.New("The signature is missing, malformed, too old, or does not match the body.")

// VerifySignature checks a signature header against the raw body: the
// header's form, the timestamp within SignatureTolerance of now, and the
// HMAC compared in constant time. Its error is ErrBadSignature (errors.Is)
// with the reason added.
func VerifySignature(header string, secret, body []byte, now time.Time) error {
	m := signatureForm.FindStringSubmatch(header)
	if m == nil {
		return fmt.Errorf("%w (header missing or not t=<unix>,v1=<64 hex>)", ErrBadSignature)
	}
	t, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return fmt.Errorf("%w (timestamp unreadable)", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(t, 0)); d > SignatureTolerance || d < -SignatureTolerance {
		return fmt.Errorf("%w (timestamp %ds from now, more than %ds: a clock is off or the request was replayed)", ErrBadSignature, int64(d.Seconds()), int64(SignatureTolerance.Seconds()))
	}
	want := mac(secret, m[1], body)
	got, _ := hex.DecodeString(m[2])
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%w (HMAC does not match: another secret, or the body was altered)", ErrBadSignature)
	}
	return nil
}

func mac(secret []byte, ts string, body []byte) []byte { return macKey{key: secret}.sum(ts, body) }

// VerifyAnySignature checks the Service-Signature field lines of a delivery
// against the secrets a receiver holds: every line must have the spec's
// form, and the delivery verifies when one line verifies with one secret
// (VerifySignature's rules). During a rotation's overlap a delivery carries
// a line per secret, so a receiver holding either secret, or both while it
// moves, accepts it. Its error is ErrBadSignature (errors.Is).
func VerifyAnySignature(headers []string, secrets [][]byte, body []byte, now time.Time) error {
	if len(headers) == 0 {
		return fmt.Errorf("%w (no %s header)", ErrBadSignature, WebhookSignatureHeader)
	}
	for _, h := range headers {
		if !signatureForm.MatchString(h) {
			return fmt.Errorf("%w (a header line is not t=<unix>,v1=<64 hex>)", ErrBadSignature)
		}
	}
	var last error
	for _, h := range headers {
		for _, secret := range secrets {
			if last = VerifySignature(h, secret, body, now); last == nil {
				return nil
			}
		}
	}
	if last == nil {
		return fmt.Errorf("%w (no secret to verify with)", ErrBadSignature)
	}
	return last
}
