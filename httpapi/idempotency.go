package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// idempotent makes a POST or PATCH safe to retry, following the IETF Idempotency-Key
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
// trusted is a 503 too: no request runs unclaimed. The rules themselves
// are app's (Service.Idempotent); this maps them to HTTP.
func (s *Server) idempotent(next claimedHandler) http.Handler {
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
		rec := &recorder{header: http.Header{}}
		h, err := s.app.Idempotent(r.Context(), partnerID(r), key[0], fp, func(ctx context.Context, claimed *app.Request) app.Answer {
			r := r.WithContext(ctx)
			r.Body = io.NopCloser(bytes.NewReader(body))
			next(rec, r, claimed)
			return app.Answer{Status: rec.status, Body: rec.body.Bytes()}
		})
		if err != nil {
			// Without a trustworthy claim the request must not run.
			writeError(w, r, fmt.Errorf("%w: idempotency begin: %w", domain.ErrUnavailable, err))
			return
		}
		if h.CompleteErr != nil {
			logger(r.Context()).Error().Err(h.CompleteErr).Msg("idempotency complete failed")
		}
		if h.ReleaseErr != nil {
			logger(r.Context()).Error().Err(h.ReleaseErr).Msg("idempotency release failed")
		}
		switch {
		case h.Mismatch:
			writeProblem(w, r, domain.ProblemIdempotencyKeyReused, "This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.", nil)
		case h.InFlight:
			secs := strconv.Itoa(int(h.RetryAfter / time.Second))
			w.Header().Set("Retry-After", secs)
			writeProblem(w, r, domain.ProblemIdempotencyInFlight, "A request with this Idempotency-Key is still running. Retry after "+secs+" seconds to get its result.", nil)
		case h.Replay != nil:
			s.cfg.Metrics.IdempotentReplay()
			replay(w, h.Replay)
		case h.Unrecorded:
			// The answer is not recorded: sending it would let a retry run
			// the key afresh. The retry gets the original answer instead.
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, domain.ProblemOutcomeUnknown, "The request ran, or may have, but its answer could not be recorded safely. Retry with the same Idempotency-Key and the same request: the retry answers with the original result and makes no second effect.", nil)
		case h.Replayed:
			// The effect was already in the ledger, made by an earlier run
			// of this request whose record was lost: answer as a replay.
			replay(w, &h.Answer)
		default:
			rec.flush(w)
		}
	})
}

// claimedHandler serves a POST or PATCH under its Idempotency-Key: claimed
// is the request whose claim its use cases run under (app.Service.Under).
type claimedHandler func(w http.ResponseWriter, r *http.Request, claimed *app.Request)

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
