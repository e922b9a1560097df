package increase

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers Increase sends with every webhook. Increase's SDKs verify them
// with the Standard Webhooks scheme, so these are that specification's names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Tolerance is how far a webhook's timestamp may be from the receiver's clock,
// in either direction, before it is refused as a possible replay. It is the
// Standard Webhooks default, which the SDKs Increase publishes apply.
const Tolerance = 5 * time.Minute

// signatureVersion is the only scheme the verifier accepts: HMAC-SHA256 with
// the shared secret. Other entries in the header (for example v1a, the
// asymmetric scheme of the same specification) are skipped, not refused, so a
// sender may add them beside a v1 signature.
const signatureVersion = "v1"

// ErrInvalidSignature is the kind of every verification failure: the edge
// answers them all alike, without saying which check failed.
var ErrInvalidSignature = errors.New("increase: webhook signature is not valid")

// The reasons a webhook fails verification, each an ErrInvalidSignature, so
// that a log line can say which check failed.
var (
	ErrNoSecret         = fmt.Errorf("%w: no webhook secret is configured", ErrInvalidSignature)
	ErrMissingHeader    = fmt.Errorf("%w: a webhook-id, webhook-timestamp or webhook-signature header is missing", ErrInvalidSignature)
	ErrMalformedHeader  = fmt.Errorf("%w: webhook-timestamp is not a whole number of Unix seconds", ErrInvalidSignature)
	ErrTimestampTooOld  = fmt.Errorf("%w: webhook-timestamp is older than the tolerance", ErrInvalidSignature)
	ErrTimestampTooNew  = fmt.Errorf("%w: webhook-timestamp is further in the future than the tolerance", ErrInvalidSignature)
	ErrSignatureMissing = fmt.Errorf("%w: webhook-signature holds no v1 signature", ErrInvalidSignature)
	ErrSignatureInvalid = fmt.Errorf("%w: no v1 signature matches the body", ErrInvalidSignature)
)

// Verify checks that body and header came from Increase: the signed content
// is "<webhook-id>.<webhook-timestamp>.<raw body>", its HMAC-SHA256 under the
// event subscription's shared secret, base64 (standard, padded), must equal
// one of the space-separated "v1,<signature>" entries of webhook-signature,
// and webhook-timestamp must lie within Tolerance of now.
//
// secret is the shared secret exactly as Increase shows it (or as it was
// passed as shared_secret when the event subscription was created): its bytes
// are the HMAC key as they are. Increase's Go SDK wraps it as
// "whsec_"+base64(secret) only to hand it to the Standard Webhooks library,
// which decodes it back, so there is no prefix to strip here.
//
// body must be the request body as received, before any JSON decoding.
func Verify(secret []byte, header http.Header, body []byte, now time.Time) error {
	if len(secret) == 0 {
		return ErrNoSecret
	}
	id, ts, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeader
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrMalformedHeader
	}
	sent := time.Unix(unix, 0)
	if now.Sub(sent) > Tolerance {
		return ErrTimestampTooOld
	}
	if sent.Sub(now) > Tolerance {
		return ErrTimestampTooNew
	}
	want := mac(secret, id, ts, body)
	found := false
	for entry := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != signatureVersion {
			continue
		}
		found = true
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	if !found {
		return ErrSignatureMissing
	}
	return ErrSignatureInvalid
}

// Sign returns the headers Increase would send with body: msgID as
// webhook-id, now in Unix seconds as webhook-timestamp and one v1 signature.
// The sandbox's simulators and the fake use it, so that a simulated deposit
// goes through the same verification as a real one.
func Sign(secret []byte, msgID string, body []byte, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	h := make(http.Header)
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, signatureVersion+","+base64.StdEncoding.EncodeToString(mac(secret, msgID, ts, body)))
	h.Set("Content-Type", "application/json")
	return h
}

// mac is the HMAC-SHA256 of the signed content under secret.
func mac(secret []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
