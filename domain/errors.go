package domain

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a failure so that each edge (HTTP, CLI, vendor webhook) can
// decide once how to present it.
type Kind string

// The kinds of failure the service distinguishes.
const (
	KindInvalid      Kind = "invalid"      // the input breaks a rule
	KindNotFound     Kind = "not_found"    // the thing does not exist for this caller
	KindConflict     Kind = "conflict"     // the request is valid but clashes with current state
	KindUnauthorized Kind = "unauthorized" // the caller could not be authenticated
	KindForbidden    Kind = "forbidden"    // the caller may not do this
	KindUnavailable  Kind = "unavailable"  // a part we depend on cannot be reached now; retry later
	KindInternal     Kind = "internal"     // a fault of ours; never shown in detail
)

// FieldError names one input field and what is wrong with it.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Error is the service's application error: a kind, a stable code naming the
// rule that failed (an entry of the catalogue in problems.go), a human
// sentence, and for validation failures the fields at fault.
type Error struct {
	Kind   Kind
	Code   Code
	Detail string
	Fields []FieldError
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Detail)
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Detail, strings.Join(parts, "; "))
}

// ErrorKind reports the kind of err, or KindInternal when err is not an *Error.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Validation collects field errors so a caller can report all of them at once.
type Validation struct {
	Fields []FieldError
}

// Add records a problem with field.
func (v *Validation) Add(field, format string, args ...any) {
	v.Fields = append(v.Fields, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Err returns nil when nothing was recorded, else a KindInvalid *Error.
func (v *Validation) Err() error {
	if len(v.Fields) == 0 {
		return nil
	}
	e := ProblemValidation.New("The request has invalid fields.")
	e.Fields = v.Fields
	return e
}

// NotFound is the error for an id the caller cannot see. It never says whether
// the thing exists for someone else.
func NotFound(what, id string) *Error {
	return ProblemNotFound.New("No %s with id %q.", what, id)
}

// ErrUnavailable marks a failure to reach a part the service depends on (the
// ledger, a bucket): the request can be retried later as it is. The ledger
// wraps such failures with it, so every edge can tell them from faults of
// ours without knowing how the ledger is reached.
var ErrUnavailable = ProblemUnavailable.New("The service cannot reach its ledger right now; retry later.")
