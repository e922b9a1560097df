package app

import (
	"context"
	"sync"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/idempotency"
)

// Partner requests that change something carry an Idempotency-Key. The
// transport claims the key before the request runs (BeginRequest), puts the
// claim in the request's context (WithClaim), and stores the answer under
// the key when it is done (CompleteRequest) or lets the key run again after
// a failure of ours (ReleaseRequest). The use cases take their commands'
// dedup ids from the claim, so a retry can never append twice.

// Claim is a running request's hold on its Idempotency-Key.
type Claim = idempotency.Claim

// Begun says what to do with a request: run it (Claim), answer the stored
// response (Replay), or refuse it (Mismatch, InFlight).
type Begun = idempotency.BeginResult

// StoredResponse is a completed request's answer.
type StoredResponse = idempotency.StoredResponse

type claimKey struct{}

// requestClaim counts the commands a request has run under its claim: the
// n-th command of every run of the request gets the same dedup id.
type requestClaim struct {
	mu       sync.Mutex
	claim    *Claim
	n        int
	replayed bool
}

// WithClaim returns a context whose use cases run under claim.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, &requestClaim{claim: c})
}

// underClaim gives a command the dedup id of the request's next command and
// the request's fingerprint, and has it first look for what an earlier run
// of the request appended: after a crash takeover, and also when the key's
// record itself was lost (records are operational and persist
// asynchronously, so a crash can lose the newest), which Begin cannot tell
// from a first run. The look-up reads the projections once they have caught
// up with the ledger; it writes nothing. It reports false outside a claimed
// request.
func underClaim(ctx context.Context, cmd *eventlog.Command, recall func(context.Context, string) (eventlog.Record, bool, error)) bool {
	rc, _ := ctx.Value(claimKey{}).(*requestClaim)
	if rc == nil || cmd.MsgID != "" {
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	cmd.MsgID, cmd.Request = rc.claim.MsgID(rc.n), rc.claim.Fingerprint
	rc.n++
	cmd.Recall = recall
	return true
}

// requestName is a stable name of the running request's Idempotency-Key
// (scoped to the partner): the same on every retry with the key, so that
// what a use case makes up outside the ledger (a simulated vendor webhook)
// is the same on a retry too. It is "" outside a claimed request.
func requestName(ctx context.Context) string {
	rc, _ := ctx.Value(claimKey{}).(*requestClaim)
	if rc == nil {
		return ""
	}
	return rc.claim.ID()
}

// ErrKeyReused answers a request whose Idempotency-Key already made an
// effect for a different request.
var ErrKeyReused = domain.ProblemIdempotencyKeyReused.New("This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.")

// settleClaimed checks what a claimed command's run found: an effect that
// an earlier run of this request appended (found by its dedup id, when the
// key's record was lost in a crash) marks the request replayed; one that a
// different request appended under the same key is refused.
func settleClaimed(ctx context.Context, cmd eventlog.Command, out eventlog.Outcome) error {
	if !out.Replayed || out.Record == nil {
		return nil
	}
	if out.Record.Request != "" && out.Record.Request != cmd.Request {
		return ErrKeyReused
	}
	markReplayed(ctx)
	return nil
}

// markReplayed records that the request's effect was found in the ledger,
// made by an earlier run of the same request.
func markReplayed(ctx context.Context) {
	if rc, _ := ctx.Value(claimKey{}).(*requestClaim); rc != nil {
		rc.mu.Lock()
		rc.replayed = true
		rc.mu.Unlock()
	}
}

// Replayed reports whether the request's effect was found already in the
// ledger, stored by an earlier run of the same request: its answer is a
// replay of the original one.
func Replayed(ctx context.Context) bool {
	rc, _ := ctx.Value(claimKey{}).(*requestClaim)
	if rc == nil {
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.replayed
}

// BeginRequest claims key, scoped to the partner, for a request with the
// given fingerprint, or says why the request must not run: among others,
// that the ledger cannot store writes now (its disk is full), at once
// rather than after the claim's own write timed out.
func (s *Service) BeginRequest(ctx context.Context, partner, key, fingerprint string) (Begun, error) {
	if err := s.ledger.Writable(); err != nil {
		return Begun{}, err
	}
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
