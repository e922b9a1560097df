package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// SignatureTolerance is how far a signature's timestamp may be from now.
const SignatureTolerance = 300 * time.Second

// The headers that carry a signature made by Sign.
const (
	// WebhookSignatureHeader signs the service's deliveries to partners.
	WebhookSignatureHeader = "Service-Signature"
	// VendorSignatureHeader signs the vendors' webhooks to the service.
	VendorSignatureHeader = "Vendor-Signature"
)

// Sign returns a signature header value for body at time t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", keyed with the
// whole secret as given (an endpoint's "whsec_..." string, prefix included).
// It is the one signer: the dispatcher signs real and test deliveries with
// it, and the sandbox simulators sign vendor webhooks with it, each with its
// own secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
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

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
