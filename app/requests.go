package app

import (
	"context"
	"errors"
	"sync"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/telemetry"
)

// Partner requests that change something carry an Idempotency-Key. The
// transport hands each one to Idempotent, which claims the key (begin),
// runs the request's use cases on a Service bound to the claim (Under), and
// stores the answer under the key (complete), or lets the key run again
// after a failure of ours (release). The use cases take their commands'
// dedup ids from the claim, so a retry can never append twice.

// Claim is a running request's hold on its Idempotency-Key.
type Claim = idempotency.Claim

// Begun says what to do with a request: run it (Claim), answer the stored
// response (Replay), or refuse it (Mismatch, InFlight).
type Begun = idempotency.BeginResult

// StoredResponse is a completed request's answer.
type StoredResponse = idempotency.StoredResponse

// Request is one partner request running under its claim on an
// Idempotency-Key. The commands its use cases run take their dedup ids from
// the claim in order, so that every run of the request gives its n-th
// command the same id, and it notes whether they found their effect in the
// ledger already (a replay). Idempotent makes one; use cases see it through
// Under.
type Request struct {
	claim *Claim

	mu       sync.Mutex
	n        int
	replayed bool
}

// next gives a command the dedup id of the request's next command and the
// request's fingerprint.
func (r *Request) next(cmd *eventlog.Command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd.MsgID, cmd.Request = r.claim.MsgID(r.n), r.claim.Fingerprint
	r.n++
}

// markReplayed records that the request's effect was found in the ledger,
// made by an earlier run of the same request.
func (r *Request) markReplayed() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.replayed = true
	r.mu.Unlock()
}

func (r *Request) wasReplayed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replayed
}

// Under returns the service running its use cases for req: their commands
// run under req's claim. A nil req is the service itself (a request with no
// Idempotency-Key: the donor's flow, the vendor edge, the CLI).
func (s *Service) Under(req *Request) *Service {
	if req == nil {
		return s
	}
	return &Service{instance: s.instance, req: req, useCase: s.useCase}
}

// requestName is a stable name of the running request's Idempotency-Key
// (scoped to the partner): the same on every retry with the key, so that
// what a use case makes up outside the ledger (a simulated vendor webhook)
// is the same on a retry too. It is "" outside a claimed request.
func (s *Service) requestName() string {
	if s.req == nil {
		return ""
	}
	return s.req.claim.ID()
}

// ErrKeyReused answers a request whose Idempotency-Key already made an
// effect for a different request.
var ErrKeyReused = domain.ProblemIdempotencyKeyReused.New("This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.")

// settleClaimed checks what a claimed command's run found: an effect that
// an earlier run of this request appended (found by its dedup id, when the
// key's record was lost in a crash) marks the request replayed; one that a
// different request appended under the same key is refused.
func (r *Request) settleClaimed(cmd eventlog.Command, out eventlog.Outcome) error {
	if !out.Replayed || out.Record == nil {
		return nil
	}
	if out.Record.Request != "" && out.Record.Request != cmd.Request {
		return ErrKeyReused
	}
	r.markReplayed()
	return nil
}

// Answer is what a request answered: its status and body, stored under its
// key as they were sent.
type Answer = StoredResponse

// Handled is what became of a request sent with an Idempotency-Key.
type Handled struct {
	// Begun is set when the request did not run: its key was used for a
	// different request (Mismatch), the first request with it is still
	// running (InFlight, RetryAfter), or it completed (Replay).
	Begun
	// Answer is what the request answered, when it ran.
	Answer Answer
	// Replayed says the run found its effect in the ledger already, made
	// by an earlier run of the same request whose record was lost: its
	// answer is the original one, to be sent as a replay.
	Replayed bool
	// Unrecorded says the answer was not stored under the key (the key
	// store failed, or the request ran past its lease): it must not be
	// sent, or a retry would run afresh; the key was released, so a retry
	// gets the original answer, recalled from the ledger.
	Unrecorded bool
	// CompleteErr and ReleaseErr are why storing the answer, or releasing
	// the key, failed, for the transport's log.
	CompleteErr, ReleaseErr error
}

// Idempotent runs a partner request under its Idempotency-Key (key, scoped
// to the partner, for a request with the given fingerprint): begin, the use
// cases (handle, given the context it must run within and the request to
// run them Under), complete. A request runs only while it holds the key:
// handle's context ends with the claim's run time, and one that ran past it
// is answered as Unrecorded (503), whatever it did being for the retry to
// recall. An answer of 500 or more releases the key, so a retry runs again
// and first recalls what this run appended; any other answer is stored
// under the key before it may be sent. The error is a begin that failed:
// without a trustworthy claim the request must not run.
func (s *Service) Idempotent(ctx context.Context, partner, key, fingerprint string, handle func(context.Context, *Request) Answer) (Handled, error) {
	begin, err := s.beginRequest(ctx, partner, key, fingerprint)
	if err != nil || begin.Claim == nil {
		return Handled{Begun: begin}, err
	}
	req := &Request{claim: begin.Claim}
	rctx, cancel := context.WithDeadline(ctx, req.claim.RunUntil)
	defer cancel()
	var h Handled
	defer func() {
		// A panic is answered 500 further out; release the key so a
		// retry need not wait out the lease.
		if v := recover(); v != nil {
			s.settle(ctx, req.claim, fingerprint, &Handled{Answer: Answer{Status: 500}})
			panic(v)
		}
	}()
	h.Answer = handle(rctx, req)
	timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded)
	if timedOut {
		h.Answer = Answer{Status: 503}
	}
	sendable := s.settle(ctx, req.claim, fingerprint, &h)
	h.Unrecorded = timedOut || !sendable
	h.Replayed = !h.Unrecorded && req.wasReplayed() && h.Answer.Status < 300
	return h, nil
}

// settle stores the answer under the key, or releases the key after a
// failure of ours, and reports whether the answer may be sent: a 5xx
// always (its retry runs the key again), any other answer only once it is
// stored. An answer that could not be stored releases the key, so the
// retry runs at once and recalls what this run appended. The request's
// context may be gone (client hung up, time limit); the record is still
// written, within the claim's hold on the key.
func (s *Service) settle(ctx context.Context, c *Claim, fingerprint string, h *Handled) bool {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), c.HoldUntil)
	defer cancel()
	status := h.Answer.Status
	if status < 500 && status != 0 {
		if h.CompleteErr = s.completeRequest(ctx, c, fingerprint, status, h.Answer.Body); h.CompleteErr == nil {
			return true
		}
	}
	h.ReleaseErr = s.releaseRequest(ctx, c, fingerprint)
	return status >= 500
}

// beginRequest claims key, scoped to the partner, for a request with the
// given fingerprint, or says why the request must not run: among others,
// that the ledger cannot store writes now (its disk is full), at once
// rather than after the claim's own write timed out.
func (s *Service) beginRequest(ctx context.Context, partner, key, fingerprint string) (Begun, error) {
	if err := s.ledger.Writable(); err != nil {
		return Begun{}, err
	}
	ctx, span := telemetry.Start(ctx, "idempotency.begin")
	b, err := s.idem.Begin(ctx, partner, key, fingerprint)
	telemetry.End(span, err)
	return b, err
}

// completeRequest stores the request's answer under its key.
func (s *Service) completeRequest(ctx context.Context, c *Claim, fingerprint string, status int, body []byte) error {
	ctx, span := telemetry.Start(ctx, "idempotency.complete")
	err := s.idem.Complete(ctx, c, fingerprint, status, body)
	telemetry.End(span, err)
	return err
}

// releaseRequest lets the key run again after the request failed on our
// side; the retry first looks for what this run may have appended.
func (s *Service) releaseRequest(ctx context.Context, c *Claim, fingerprint string) error {
	return s.idem.Release(ctx, c, fingerprint)
}
