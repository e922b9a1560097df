package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// SignatureHeader carries a delivery's signature.
const SignatureHeader = "Service-Signature"

// Sign returns the Service-Signature value of body sent at t:
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the
// endpoint's whole whsec_ secret>. Real and test deliveries are both signed
// here.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
