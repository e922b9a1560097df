package truv

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The three kinds of failure a caller has to tell apart. Test them with
// errors.Is; get the details with errors.As on *RefusedError or
// *UnavailableError.
var (
	// ErrInvalidRequest: the service's own input cannot make a valid Truv
	// request (a bad routing number, an allocation out of range). Nothing
	// was sent.
	ErrInvalidRequest = errors.New("truv: invalid request")
	// ErrRefused: Truv answered and refused the request (a 4xx other than
	// 429). Sending the same request again gets the same answer; the fix is
	// in the request or in the account's configuration.
	ErrRefused = errors.New("truv: request refused")
	// ErrUnavailable: Truv could not be reached, timed out, answered 5xx,
	// or asked us to slow down (429). The same request may succeed later.
	ErrUnavailable = errors.New("truv: unavailable")
)

// InvalidParam is one entry of Truv's extra.invalid-params list on a 400:
// the offending field and why it was refused.
type InvalidParam struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// RefusedError is Truv refusing a request, with what its error body said.
// Truv's documented error body is {"error": {"code", "message", "extra":
// {"invalid-params": [...]}}}, except on 404 where it is {"detail": "..."}
// (Errors & Rate Limits, docs.truv.com/api-reference/errors).
type RefusedError struct {
	Op            string // what the client was doing, e.g. "create bridge token"
	Status        int
	Code          string // error.code; empty on a 404
	Message       string // error.message, or detail on a 404
	InvalidParams []InvalidParam
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "truv %s: refused with %d", e.Op, e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	for _, p := range e.InvalidParams {
		fmt.Fprintf(&b, "; %s: %s", p.Field, p.Message)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// UnavailableError is Truv not answering usefully: a network error, a
// timeout, a 5xx, or a 429. Status is 0 when no answer came at all.
type UnavailableError struct {
	Op         string
	Status     int
	RetryAfter time.Duration // from a Retry-After header, when Truv sent one
	Err        error         // the transport error, when there was one
}

func (e *UnavailableError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("truv %s: unavailable: %v", e.Op, e.Err)
	case e.RetryAfter > 0:
		return fmt.Sprintf("truv %s: unavailable: answered %d, retry after %s", e.Op, e.Status, e.RetryAfter)
	}
	return fmt.Sprintf("truv %s: unavailable: answered %d", e.Op, e.Status)
}

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap exposes the transport error (context.DeadlineExceeded, a net.Error).
func (e *UnavailableError) Unwrap() error { return e.Err }
