package domain

import (
	"strconv"
	"time"
)

// What the package's black-box tests use of it beyond the service's own
// use.

// DecodeEnvelope turns envelope bytes of a current event type back into an
// Event. The caller supplies the partner and aggregate, which the ledger
// keeps in the subject.
func DecodeEnvelope(partnerID, aggregateID string, data []byte) (Event, error) {
	return decodeEnvelope(partnerID, aggregateID, data, func(typ string) (EventSpec, bool) {
		spec, ok := catalogue[typ]
		return spec, ok
	})
}

// SignStandard returns the Standard Webhooks signature of body:
// "v1,<base64 of HMAC-SHA256 over "<id>.<unix t>.<body>">", keyed with
// StandardKey(secret), made apart from WebhookSigner, for the test against
// the scheme's published vector.
func SignStandard(secret, id string, t time.Time, body []byte) string {
	return standardSignature(macKey{key: StandardKey(secret)}.sum(id+"."+strconv.FormatInt(t.Unix(), 10), body))
}
