package stripeidentity

import (
	"errors"
	"fmt"
	"net/http"
)

// Kinds of failure of a call to Stripe, tested with errors.Is.
var (
	// ErrRefused: Stripe answered and refused the request (a 4xx other than
	// 409 and 429): a bad parameter, a wrong key, an unknown session.
	// Repeating the same request will fail the same way.
	ErrRefused = errors.New("stripe refused the request")
	// ErrUnavailable: no usable answer: a network failure, a timeout, a
	// 5xx, a 429 rate limit, a 409 conflict with a concurrent request using
	// the same idempotency key, or a body that does not decode. The same
	// request, with the same idempotency key, may succeed later.
	ErrUnavailable = errors.New("stripe unavailable")
	// ErrInvalidParams: the call was refused before anything was sent,
	// because its parameters break a rule of this package or of Stripe's
	// documented limits.
	ErrInvalidParams = errors.New("invalid parameters")
)

// Error is a failed call to Stripe's API. It carries what was attempted,
// the kind of failure (errors.Is with ErrRefused or ErrUnavailable), and
// Stripe's error object when Stripe sent one
// (docs.stripe.com/api/errors).
type Error struct {
	// Op names the call, e.g. "create verification session".
	Op string
	// Refused is true for ErrRefused, false for ErrUnavailable.
	Refused bool
	// HTTPStatus is Stripe's status code, 0 when no answer came.
	HTTPStatus int
	// Type, Code, Message and Param are Stripe's error object.
	Type    string
	Code    string
	Message string
	Param   string
	// RequestID is Stripe's Request-Id header, to quote to Stripe support.
	RequestID string
	// Err is the underlying failure (network, timeout, decoding), if any.
	Err error
}

func (e *Error) Error() string {
	kind := "unavailable"
	if e.Refused {
		kind = "refused"
	}
	msg := fmt.Sprintf("stripe identity: %s: %s", e.Op, kind)
	if e.HTTPStatus != 0 {
		msg += fmt.Sprintf(" (%d %s)", e.HTTPStatus, http.StatusText(e.HTTPStatus))
	}
	if e.Type != "" {
		msg += ": " + e.Type
	}
	if e.Code != "" {
		msg += "/" + e.Code
	}
	if e.Param != "" {
		msg += " param " + e.Param
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " [" + e.RequestID + "]"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrRefused) and errors.Is(err, ErrUnavailable)
// answer by kind.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrRefused:
		return e.Refused
	case ErrUnavailable:
		return !e.Refused
	}
	return false
}

func (e *Error) Unwrap() error { return e.Err }

// retryableStatus says whether Stripe's status code means "try again
// later" rather than "no". Stripe documents 409 as a conflict with another
// request (for example one using the same idempotency key) and 429 as too
// many requests; stripe-go retries both kinds, and every 5xx.
func retryableStatus(code int) bool {
	return code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
}
