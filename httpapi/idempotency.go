package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// maxIdempotencyKey is the longest Idempotency-Key accepted.
const maxIdempotencyKey = 255

// validIdempotencyKey accepts 1 to 255 visible ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotent makes a POST safe to retry, following the IETF Idempotency-Key
// draft. The key is checked before anything happens. A key is scoped to the
// partner; its record (and the response, sealed) lives in JetStream KV, so it
// holds across restarts and instances:
//
//   - same key, same request, finished: the stored response again, 200 for a
//     success, with Idempotent-Replayed: true;
//   - same key, different request: 422;
//   - same key while the first is running: 409 with Retry-After.
//
// Responses of 5xx release the key so that a retry runs again; the retry
// first looks for an event the failed run may have stored. Any other answer
// leaves only once it is stored under the key: when it cannot be (the key
// store became unreachable), or the request ran past its lease on the key,
// the key is released and the answer is 503 outcome-unknown with
// Retry-After, so the retry gets the original answer (recalled from the
// ledger) and never a second effect. A claim that cannot be made or
// trusted is a 503 too: no request runs unclaimed.
func (s *Server) idempotent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header["Idempotency-Key"]
		if len(key) == 0 {
			writeProblem(w, r, domain.ProblemIdempotencyKeyMissing, "Send an Idempotency-Key header with every POST and PATCH: 1 to 255 visible ASCII characters, new for each distinct request.", nil)
			return
		}
		if len(key) > 1 || !validIdempotencyKey(key[0]) {
			writeProblem(w, r, domain.ProblemIdempotencyKeyInvalid, "Idempotency-Key must be sent once, as 1 to 255 visible ASCII characters (0x21 to 0x7E).", nil)
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		fp := s.fingerprint(r, body)
		begin, err := s.app.BeginRequest(r.Context(), partnerID(r), key[0], fp)
		if err != nil {
			// Without a trustworthy claim the request must not run.
			writeError(w, r, fmt.Errorf("%w: idempotency begin: %w", domain.ErrUnavailable, err))
			return
		}
		switch {
		case begin.Mismatch:
			writeProblem(w, r, domain.ProblemIdempotencyKeyReused, "This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.", nil)
			return
		case begin.InFlight:
			secs := strconv.Itoa(int(begin.RetryAfter / time.Second))
			w.Header().Set("Retry-After", secs)
			writeProblem(w, r, domain.ProblemIdempotencyInFlight, "A request with this Idempotency-Key is still running. Retry after "+secs+" seconds to get its result.", nil)
			return
		case begin.Replay != nil:
			s.cfg.Metrics.IdempotentReplay()
			replay(w, begin.Replay)
			return
		}
		claim := begin.Claim
		r.Body = io.NopCloser(bytes.NewReader(body))
		// The request may run only while it holds the key.
		ctx, cancel := context.WithDeadline(app.WithClaim(r.Context(), claim), claim.RunUntil)
		defer cancel()
		r = r.WithContext(ctx)
		rec := &recorder{header: http.Header{}}
		defer func() {
			// A panic is answered 500 further out; release the key so a
			// retry need not wait out the lease.
			if v := recover(); v != nil {
				s.settle(r, claim, fp, &recorder{status: http.StatusInternalServerError})
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		if timedOut {
			// It ran past its time: whatever it did is for the retry to
			// recall, once the key is released.
			rec = &recorder{status: http.StatusServiceUnavailable}
		}
		if sendable := s.settle(r, claim, fp, rec); timedOut || !sendable {
			// The answer is not recorded: sending it would let a retry run
			// the key afresh. The retry gets the original answer instead.
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, domain.ProblemOutcomeUnknown, "The request ran, or may have, but its answer could not be recorded safely. Retry with the same Idempotency-Key and the same request: the retry answers with the original result and makes no second effect.", nil)
			return
		}
		if app.Replayed(r.Context()) && rec.status < 300 {
			// The effect was already in the ledger, made by an earlier run
			// of this request whose record was lost: answer as a replay.
			replay(w, &app.StoredResponse{Status: rec.status, Body: rec.body.Bytes()})
			return
		}
		rec.flush(w)
	})
}

// settle stores the response under the key, or releases the key after a
// failure of ours, and reports whether the response may be sent: a 5xx
// always (its retry runs the key again), any other answer only once it is
// stored. An answer that could not be stored releases the key, so the retry
// runs at once and recalls what this run appended. The request context may
// be gone (client hung up, time limit); the record is still written, within
// the claim's hold on the key.
func (s *Server) settle(r *http.Request, c *app.Claim, fp string, rec *recorder) bool {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), c.HoldUntil)
	defer cancel()
	if rec.status < 500 && rec.status != 0 {
		err := s.app.CompleteRequest(ctx, c, fp, rec.status, rec.body.Bytes())
		if err == nil {
			return true
		}
		logger(r.Context()).Error().Err(err).Msg("idempotency complete failed")
	}
	if err := s.app.ReleaseRequest(ctx, c, fp); err != nil {
		logger(r.Context()).Error().Err(err).Msg("idempotency release failed")
	}
	return rec.status >= 500
}

func replay(w http.ResponseWriter, sr *app.StoredResponse) {
	status, ct := sr.Status, "application/json"
	if status >= 400 {
		ct = "application/problem+json"
	} else {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(status)
	_, _ = w.Write(sr.Body)
}

// fingerprint identifies a request: method, path and body. It is keyed: a
// body can hold a donor's phone, and a plain hash of it could be reversed by
// trying every phone number.
func (s *Server) fingerprint(r *http.Request, body []byte) string {
	h := hmac.New(sha256.New, s.cfg.Keys.Fingerprint)
	io.WriteString(h, r.Method+" "+r.URL.EscapedPath()+"\n")
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// recorder holds a response until the idempotency record is written, so a
// client never sees an answer whose key was not yet recorded.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) flush(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusInternalServerError
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
