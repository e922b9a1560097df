package domain

import (
	"slices"
	"time"
)

// Webhook recoveries: a partner asks for every event an endpoint subscribes
// to within a range to be delivered again, in ledger order (Svix's
// "recover"). A recovery is an operational record, not a fact of the
// ledger: it is kept with its progress, so it resumes after a restart from
// the last event it sent.

// MaxRecoveryAge bounds how far back a recovery reaches.
const MaxRecoveryAge = 30 * 24 * time.Hour

// The status of a recovery.
const (
	RecoveryRunning   = "running"
	RecoveryCompleted = "completed"
	RecoveryFailed    = "failed"
)

// WebhookRecovery is one recovery and how far it went.
type WebhookRecovery struct {
	ID         string `json:"id"`
	PartnerID  string `json:"partner_id"`
	EndpointID string `json:"endpoint_id"`
	// Types are the event types sent; empty means every type.
	Types []string `json:"types,omitempty"`
	// After is the feed position the range is read after; UpTo the last
	// ledger sequence it includes (the end of the ledger when it was
	// asked for: later events reach the endpoint the usual way).
	After uint64 `json:"after"`
	UpTo  uint64 `json:"up_to"`
	// From and Until bound the events' occurred_at (Until zero: no upper
	// bound). From is never older than MaxRecoveryAge before CreatedAt.
	From  time.Time `json:"from"`
	Until time.Time `json:"until,omitzero"`

	Status string `json:"status"`
	// Total is how many events the range holds; Sent how many were
	// attempted, Failed how many of those attempts failed.
	Total  int `json:"total"`
	Sent   int `json:"sent"`
	Failed int `json:"failed"`
	// Position is the ledger sequence of the last event handled.
	Position uint64 `json:"position"`
	// Error says why a failed recovery stopped.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Owner is the instance running it, until LeaseUntil; another
	// instance takes it over once the lease ran out.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// Includes reports whether the range holds an event of type typ that
// occurred at t.
func (r *WebhookRecovery) Includes(typ string, t time.Time) bool {
	if len(r.Types) > 0 && !slices.Contains(r.Types, typ) {
		return false
	}
	return !t.Before(r.From) && (r.Until.IsZero() || !t.After(r.Until))
}

// RecoveryRange is what a partner asks to recover: a start time or a feed
// position (exactly one), and an optional end time.
type RecoveryRange struct {
	Since       *time.Time
	SinceCursor *uint64
	Until       *time.Time
}

// ValidateRecoveryRange checks a range asked for at now and returns the
// earliest occurred_at it reaches: Since, or MaxRecoveryAge before now for
// a cursor.
func ValidateRecoveryRange(r RecoveryRange, now time.Time) (time.Time, error) {
	oldest := now.Add(-MaxRecoveryAge)
	switch {
	case (r.Since == nil) == (r.SinceCursor == nil):
		return time.Time{}, ProblemInvalidRange.New("Give exactly one of since (an RFC 3339 time) and since_cursor (a next_cursor of GET /v1/events).")
	case r.Since != nil && r.Since.Before(oldest):
		return time.Time{}, ProblemInvalidRange.New("since is more than 30 days ago; a recovery reaches back 30 days at most.")
	case r.Since != nil && r.Since.After(now):
		return time.Time{}, ProblemInvalidRange.New("since is in the future.")
	case r.Until != nil && r.Since != nil && !r.Until.After(*r.Since):
		return time.Time{}, ProblemInvalidRange.New("until must be after since.")
	case r.Until != nil && r.Until.Before(oldest):
		return time.Time{}, ProblemInvalidRange.New("until is more than 30 days ago; a recovery reaches back 30 days at most.")
	}
	if r.Since != nil {
		return *r.Since, nil
	}
	return oldest, nil
}
