package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/partnergiving/giving/domain"
)

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
func writeProblem(w http.ResponseWriter, r *http.Request, p domain.Problem, detail string, fields []domain.FieldError) {
	body := problemBody(p, detail, requestID(r.Context()), fields)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// problemBody is the problem+json body of p for the request with this id.
func problemBody(p domain.Problem, detail, requestID string, fields []domain.FieldError) []byte {
	if detail == "" {
		detail = p.Title + "."
	}
	body, _ := json.Marshal(problem{Type: p.TypeURI(), Title: p.Title, Status: p.Status, Detail: detail, RequestID: requestID, Errors: fields})
	return body
}

// writeError maps an error to its problem: the one place where an
// application error becomes an HTTP status, the one its catalogue entry
// names. A failure to reach the ledger (or a wait for it that ran out) is a
// 503 to retry; anything else that is not a domain error is ours, is
// logged, and is answered without detail.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var de *domain.Error
	switch {
	case errors.Is(err, domain.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		logger(r.Context()).Error().Err(err).Msg("request failed: unavailable")
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, domain.ProblemUnavailable, "", nil)
		return
	case !errors.As(err, &de):
		logger(r.Context()).Error().Err(err).Msg("request failed")
		writeProblem(w, r, domain.ProblemInternal, "", nil)
		return
	}
	p, ok := domain.ProblemFor(de.Code)
	if !ok || p.Flow {
		p = problemOfKind[de.Kind]
	}
	switch {
	case p.Code == domain.ProblemUnauthorized.Code:
		writeUnauthorized(w, r)
	case p.Status >= 500 && p.Status != http.StatusBadGateway:
		logger(r.Context()).Error().Err(err).Msg("request failed")
		writeProblem(w, r, domain.ProblemInternal, "", nil)
	default:
		writeProblem(w, r, p, de.Detail, de.Fields)
	}
}

// problemOfKind answers an error whose code partners are not shown (a
// hosted-flow code reaching the API) by its kind.
var problemOfKind = map[domain.Kind]domain.Problem{
	domain.KindInvalid:      domain.ProblemValidation,
	domain.KindNotFound:     domain.ProblemNotFound,
	domain.KindConflict:     domain.ProblemConflict,
	domain.KindUnauthorized: domain.ProblemUnauthorized,
	domain.KindForbidden:    domain.ProblemInternal,
	domain.KindUnavailable:  domain.ProblemInternal,
	domain.KindInternal:     domain.ProblemInternal,
}

// writeUnauthorized is the single 401: the same status, headers and body
// (apart from request_id) whatever was wrong with the key.
func writeUnauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="giving"`)
	writeProblem(w, r, domain.ProblemUnauthorized, "A valid API key is required.", nil)
}

func writeRateLimited(w http.ResponseWriter, r *http.Request, retry time.Duration) {
	secs := int((retry + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeProblem(w, r, domain.ProblemRateLimited, "Rate limit exceeded for this API key. Retry after "+strconv.Itoa(secs)+" seconds.", nil)
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
