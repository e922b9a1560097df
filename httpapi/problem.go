package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/partnergiving/giving/domain"
)

// ProblemType is one entry of the catalogue of errors partners can receive.
// The slug is stable: partners may branch on it. The type URI is relative to
// the service, which serves a description of each slug at that address.
type ProblemType struct {
	Slug   string
	Status int
	Title  string
	// About explains, for the catalogue page, when it happens and what to do.
	About string
}

// The catalogue. Every error response the service sends uses one of these.
var (
	ProblemUnauthorized = reg(ProblemType{"unauthorized", 401, "Unauthorized",
		"The request has no valid API key for this stack. Send Authorization: Bearer sk_test_... on the sandbox or sk_live_... in production. Missing, malformed, unknown, revoked and wrong-stack keys all get this same answer."})
	ProblemNotFound = reg(ProblemType{"not-found", 404, "Not found",
		"No such route, or no such resource visible to this partner. A resource of another partner is reported the same way as one that does not exist."})
	ProblemMethodNotAllowed = reg(ProblemType{"method-not-allowed", 405, "Method not allowed",
		"The route exists but not for this method. The Allow header lists the methods it takes."})
	ProblemMalformedJSON = reg(ProblemType{"malformed-json", 400, "Malformed JSON",
		"The request body is not a single valid JSON value of the expected shape."})
	ProblemUnsupportedMedia = reg(ProblemType{"unsupported-media-type", 415, "Unsupported media type",
		"Request bodies must be sent with Content-Type: application/json."})
	ProblemPayloadTooLarge = reg(ProblemType{"payload-too-large", 413, "Payload too large",
		"The request body exceeds 1 MiB."})
	ProblemBatchTooLarge = reg(ProblemType{"batch-too-large", 413, "Batch too large",
		"A church import holds at most 1000 rows. Split the batch."})
	ProblemValidation = reg(ProblemType{"validation-error", 422, "Validation failed",
		"One or more fields are invalid. The errors list names each field and what is wrong with it."})
	ProblemInvalidRow = reg(ProblemType{"invalid-row", 422, "Invalid row",
		"One row of a batch is invalid. The row is rejected on its own and the rest of the batch goes ahead."})
	ProblemExternalIDTaken = reg(ProblemType{"external-id-taken", 409, "external_id already used",
		"The partner already has a church with this external_id, or the batch repeats it. The row is rejected on its own."})
	ProblemIdempotencyKeyMissing = reg(ProblemType{"idempotency-key-missing", 400, "Idempotency-Key required",
		"Every POST must carry an Idempotency-Key header of 1 to 255 visible ASCII characters."})
	ProblemIdempotencyKeyInvalid = reg(ProblemType{"idempotency-key-invalid", 400, "Idempotency-Key invalid",
		"The Idempotency-Key header must be 1 to 255 visible ASCII characters (0x21 to 0x7E)."})
	ProblemIdempotencyKeyReused = reg(ProblemType{"idempotency-key-reused", 422, "Idempotency-Key reused",
		"This key was already used with a different request (method, path or body). Use a new key for a new request."})
	ProblemIdempotencyInFlight = reg(ProblemType{"idempotency-key-in-use", 409, "Request in progress",
		"A request with this key is still running. Retry after the time in Retry-After to get its result."})
	ProblemRateLimited = reg(ProblemType{"rate-limited", 429, "Too many requests",
		"The API key exceeded its rate limit. Wait for the time in Retry-After; RateLimit and RateLimit-Policy describe the budget."})
	ProblemConflict = reg(ProblemType{"conflict", 409, "Conflict",
		"The request clashes with the resource's current state."})
	ProblemInvalidCursor = reg(ProblemType{"invalid-cursor", 400, "Invalid cursor",
		"The cursor was not issued by this service to this partner, or was altered. Use a next_cursor exactly as returned, or omit it to start over."})
	ProblemInternal = reg(ProblemType{"internal-error", 500, "Internal error",
		"Something failed on our side. Nothing about it is in this response; quote request_id to support. The request may be retried with the same Idempotency-Key."})
	ProblemUnavailable = reg(ProblemType{"service-unavailable", 503, "Service unavailable",
		"The service cannot reach its ledger right now. Retry later with the same Idempotency-Key."})
)

var catalogue = map[string]ProblemType{}

func reg(p ProblemType) ProblemType {
	if _, dup := catalogue[p.Slug]; dup {
		panic("httpapi: problem registered twice: " + p.Slug)
	}
	catalogue[p.Slug] = p
	return p
}

// Problems lists the catalogue, sorted by slug.
func Problems() []ProblemType {
	out := make([]ProblemType, 0, len(catalogue))
	for _, p := range catalogue {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// TypeURI is the problem's type member.
func (p ProblemType) TypeURI() string { return "/problems/" + p.Slug }

// problem is the RFC 9457 (formerly 7807) body.
type problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	RequestID string              `json:"request_id"`
	Errors    []domain.FieldError `json:"errors,omitempty"`
}

// writeProblem sends a problem+json response. It is the only writer of error
// bodies in the service.
func writeProblem(w http.ResponseWriter, r *http.Request, p ProblemType, detail string, fields []domain.FieldError) {
	if detail == "" {
		detail = p.Title + "."
	}
	body, _ := json.Marshal(problem{Type: p.TypeURI(), Title: p.Title, Status: p.Status, Detail: detail, RequestID: requestID(r.Context()), Errors: fields})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// writeError maps an error to its problem: the one place where an
// application error becomes an HTTP status. Anything that is not a domain
// error is ours, is logged, and is answered without detail.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		logger(r.Context()).Error().Err(err).Msg("request failed")
		if isUnavailable(err) {
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, ProblemUnavailable, "", nil)
			return
		}
		writeProblem(w, r, ProblemInternal, "", nil)
		return
	}
	if p, ok := catalogue[de.Code]; ok && p.Status/100 == 4 {
		writeProblem(w, r, p, de.Detail, de.Fields)
		return
	}
	switch de.Kind {
	case domain.KindInvalid:
		writeProblem(w, r, ProblemValidation, de.Detail, de.Fields)
	case domain.KindNotFound:
		writeProblem(w, r, ProblemNotFound, de.Detail, nil)
	case domain.KindConflict:
		writeProblem(w, r, ProblemConflict, de.Detail, nil)
	case domain.KindUnauthorized:
		writeUnauthorized(w, r)
	default:
		logger(r.Context()).Error().Err(err).Msg("request failed")
		writeProblem(w, r, ProblemInternal, "", nil)
	}
}

// writeUnauthorized is the single 401: the same status, headers and body
// (apart from request_id) whatever was wrong with the key.
func writeUnauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="giving"`)
	writeProblem(w, r, ProblemUnauthorized, "A valid API key is required.", nil)
}

func writeRateLimited(w http.ResponseWriter, r *http.Request, retry time.Duration) {
	secs := int(retry.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeProblem(w, r, ProblemRateLimited, "Rate limit exceeded for this API key. Retry after "+strconv.Itoa(secs)+" seconds.", nil)
}

// writeJSON sends a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Our own types always marshal; this is a programming error.
		panic("httpapi: marshal response: " + err.Error())
	}
	writeJSONBytes(w, status, body)
}

// writeJSONBytes sends an already encoded JSON body, for responses that embed
// stored bytes verbatim (the event feed).
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
