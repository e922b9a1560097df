package app

import (
	"context"
	"sync"

	"github.com/partnergiving/giving/eventlog"
)

// Partner requests that change something carry an Idempotency-Key. The
// transport claims the key before the request runs (BeginRequest), puts the
// claim in the request's context (WithClaim), and stores the answer under
// the key when it is done (CompleteRequest) or lets the key run again after
// a failure of ours (ReleaseRequest). The use cases take their commands'
// dedup ids from the claim, so a retry can never append twice.

// Claim is a running request's hold on its Idempotency-Key.
type Claim = eventlog.Claim

// Begun says what to do with a request: run it (Claim), answer the stored
// response (Replay), or refuse it (Mismatch, InFlight).
type Begun = eventlog.BeginResult

// StoredResponse is a completed request's answer.
type StoredResponse = eventlog.StoredResponse

type claimKey struct{}

// requestClaim counts the commands a request has run under its claim: the
// n-th command of every run of the request gets the same dedup id.
type requestClaim struct {
	mu    sync.Mutex
	claim *Claim
	n     int
}

// WithClaim returns a context whose use cases run under claim.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, &requestClaim{claim: c})
}

// nextMsgID is the dedup id of the request's next command, and whether the
// command must first look for what a dead run of the request appended.
func nextMsgID(ctx context.Context) (msgID string, takeover, ok bool) {
	rc, _ := ctx.Value(claimKey{}).(*requestClaim)
	if rc == nil {
		return "", false, false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	id := rc.claim.MsgID(rc.n)
	rc.n++
	return id, rc.claim.Takeover, true
}

// BeginRequest claims key, scoped to the partner, for a request with the
// given fingerprint, or says why the request must not run.
func (s *Service) BeginRequest(ctx context.Context, partner, key, fingerprint string) (Begun, error) {
	return s.idem.Begin(ctx, partner, key, fingerprint)
}

// CompleteRequest stores the request's answer under its key.
func (s *Service) CompleteRequest(ctx context.Context, c *Claim, fingerprint string, status int, body []byte) error {
	return s.idem.Complete(ctx, c, fingerprint, status, body)
}

// ReleaseRequest lets the key run again after the request failed on our
// side; the retry first looks for what this run may have appended.
func (s *Service) ReleaseRequest(ctx context.Context, c *Claim, fingerprint string) error {
	return s.idem.Release(ctx, c, fingerprint)
}
