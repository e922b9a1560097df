package stripeidentity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the header Stripe signs every webhook with.
const SignatureHeader = "Stripe-Signature"

// Tolerance is how far a signature's timestamp may be from the receiver's
// clock: Stripe's libraries default to 300 seconds, the same as the
// service's own webhooks.
const Tolerance = 300 * time.Second

// ErrSignature is wrapped by every reason a webhook's signature is refused,
// so that the edge can answer all of them the same way with one
// errors.Is, and still log which one it was.
var ErrSignature = errors.New("stripe webhook signature refused")

// Why a webhook's signature was refused, tested with errors.Is. The names
// follow stripe-go's webhook package.
var (
	ErrNotSigned        = fmt.Errorf("%w: no Stripe-Signature header", ErrSignature)
	ErrInvalidHeader    = fmt.Errorf("%w: invalid Stripe-Signature header", ErrSignature)
	ErrNoValidSignature = fmt.Errorf("%w: no valid v1 signature", ErrSignature)
	ErrTooOld           = fmt.Errorf("%w: timestamp outside the tolerance", ErrSignature)
)

// Sign computes the Stripe-Signature header value for body at now:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", keyed with the
// whole endpoint secret as Stripe gives it (whsec_ prefix included). The
// sandbox's stand-in and the test fake both sign with it, so that what they
// send is exactly what VerifySignature accepts from Stripe.
func Sign(secret string, body []byte, now time.Time) string {
	t := strconv.FormatInt(now.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, t, body))
}

func mac(secret, t string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature checks a Stripe-Signature header against the raw body, as
// Stripe documents for manual verification (docs.stripe.com/webhooks,
// "Verify webhook signatures manually"): split the header on "," into
// prefix=value pairs; t is the timestamp, each v1 a signature (Stripe sends
// several while an endpoint secret is being rolled), any other prefix (such
// as v0) is ignored; the expected signature is the HMAC-SHA256 of
// "<t>.<raw body>" keyed with the endpoint secret; one v1 must equal it,
// compared in constant time; and the timestamp must be within Tolerance of
// now. The tolerance is applied in both directions: a timestamp from the
// future is as suspect as an old one (stripe-go checks only age).
func VerifySignature(header string, body []byte, secret string, now time.Time) error {
	if header == "" {
		return ErrNotSigned
	}
	t, sigs, err := parseSignatureHeader(header)
	if err != nil {
		return err
	}
	ts, _ := strconv.ParseInt(t, 10, 64)
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return ErrTooOld
	}
	want := mac(secret, t, body)
	for _, s := range sigs {
		if hmac.Equal(want, s) {
			return nil
		}
	}
	return ErrNoValidSignature
}

// parseSignatureHeader returns the header's timestamp (digits only) and its
// v1 signatures that decode as hex. A v1 that does not decode is skipped,
// as stripe-go skips it: another v1 may still match.
func parseSignatureHeader(header string) (string, [][]byte, error) {
	var t string
	var sigs [][]byte
	for _, pair := range strings.Split(header, ",") {
		prefix, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return "", nil, ErrInvalidHeader
		}
		switch prefix {
		case "t":
			if t != "" || !allDigits(value) {
				return "", nil, ErrInvalidHeader
			}
			t = value
		case "v1":
			if sig, err := hex.DecodeString(value); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	if t == "" {
		return "", nil, ErrInvalidHeader
	}
	if len(sigs) == 0 {
		return "", nil, ErrNoValidSignature
	}
	return t, sigs, nil
}

func allDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
