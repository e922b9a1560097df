package truv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EventType is what a Truv webhook means for an enrollment, in the
// service's words rather than Truv's.
type EventType string

// The outcomes the service acts on, and the Truv webhook each comes from.
const (
	// SwitchSubmitted: the donor signed in inside Truv Bridge and Truv began
	// writing the allocation into the payroll provider. From
	// task-status-updated with status switch_deposit ("Direct deposit
	// switching started"). The service records enrollment.created.
	SwitchSubmitted EventType = "switch_submitted"
	// SwitchConfirmed: Truv finished the switch at the payroll provider.
	// From task-status-updated with status done on a deposit_switch task.
	// The service records enrollment.activated. A done can arrive without
	// the switch_deposit before it (a lost delivery): treat it as both.
	SwitchConfirmed EventType = "switch_confirmed"
	// SwitchFailed: the switch ended in one of Truv's terminal task errors
	// (login_error, mfa_error, config_error, account_locked, no_data,
	// unavailable, error). Reason holds the status.
	SwitchFailed EventType = "switch_failed"
	// SwitchReverted: Truv reports the connection behind the switch gone.
	// From link-deleted ("personal data and credentials are removed from a
	// Link"). Truv documents no webhook for an allocation undone at the
	// payroll provider; link-deleted is the nearest documented signal and
	// means Truv no longer holds the connection. The service records
	// enrollment.ended.
	SwitchReverted EventType = "switch_reverted"
)

// Truv's webhook event types this package reads (Task Webhook Events,
// docs.truv.com/api-reference/tasks/events; Account Link Webhook Events,
// docs.truv.com/api-reference/links/events).
const (
	EventTaskStatusUpdated = "task-status-updated"
	EventLinkConnected     = "link-connected"
	EventLinkDisconnected  = "link-disconnected"
	EventLinkDeleted       = "link-deleted"
)

// Truv's task statuses (Task Lifecycle, docs.truv.com/api-reference/tasks/lifecycle).
const (
	StatusNew           = "new"
	StatusLogin         = "login"
	StatusMFA           = "mfa"
	StatusSwitchDeposit = "switch_deposit"
	StatusDone          = "done"
)

// failedStatuses are Truv's terminal task error states.
var failedStatuses = map[string]bool{
	"login_error":    true,
	"mfa_error":      true,
	"config_error":   true,
	"account_locked": true,
	"no_data":        true,
	"unavailable":    true,
	"error":          true,
}

// ErrIgnored: the webhook is authentic but says nothing the service acts
// on (another product's task, a task still in progress, a link-connected).
// The edge answers it 2xx so Truv does not retry it.
var ErrIgnored = errors.New("truv: webhook not needed by the service")

// Event is a Truv webhook reduced to what the service needs. Every field
// comes from the webhook body; none is a donor's personal data.
type Event struct {
	ID         string    // webhook_id: deduplicate on it
	Type       EventType // empty when the webhook is ignored
	VendorType string    // Truv's event_type
	Status     string    // the task status, for task events
	UserID     string    // Truv's user id, as StartSwitch returned it
	Reference  string    // tracking_info: the Reference given to StartSwitch
	LinkID     string
	TaskID     string
	Product    string
	Reason     string // for SwitchFailed and SwitchReverted: Truv's status or event
	OccurredAt time.Time
}

// Webhook is a Truv webhook body: the fields every webhook carries
// (webhook_id, event_type, event_created_at, user_id) and those of task and
// link events (task_id, link_id, product, data_source, tracking_info,
// status). BuildEvent covers the four outcomes; the stand-in Truv also
// marshals a Webhook directly for the events the service ignores.
type Webhook struct {
	WebhookID      string  `json:"webhook_id"`
	EventType      string  `json:"event_type"`
	EventCreatedAt string  `json:"event_created_at"`
	UserID         string  `json:"user_id,omitempty"`
	TaskID         string  `json:"task_id,omitempty"`
	LinkID         string  `json:"link_id,omitempty"`
	Product        string  `json:"product,omitempty"`
	DataSource     string  `json:"data_source,omitempty"`
	TrackingInfo   *string `json:"tracking_info"`
	Status         string  `json:"status,omitempty"`
}

// ParseEvent reads a verified webhook body. It returns the event and nil
// for the four outcomes above; the event (with its ids filled, which lets
// the edge learn a link id) and an error matching ErrIgnored for anything
// else; and another error when the body is not a Truv webhook at all.
func ParseEvent(body []byte) (Event, error) {
	var w Webhook
	if err := json.Unmarshal(body, &w); err != nil {
		return Event{}, fmt.Errorf("truv webhook: decode: %w", err)
	}
	if w.WebhookID == "" || w.EventType == "" {
		return Event{}, errors.New("truv webhook: webhook_id and event_type are required")
	}
	at, err := parseTime(w.EventCreatedAt)
	if err != nil {
		return Event{}, fmt.Errorf("truv webhook %s: %w", w.WebhookID, err)
	}
	e := Event{
		ID:         w.WebhookID,
		VendorType: w.EventType,
		Status:     w.Status,
		UserID:     w.UserID,
		LinkID:     w.LinkID,
		TaskID:     w.TaskID,
		Product:    w.Product,
		OccurredAt: at,
	}
	if w.TrackingInfo != nil {
		e.Reference = *w.TrackingInfo
	}
	e.Type, e.Reason = classify(w)
	if e.Type == "" {
		return e, fmt.Errorf("truv webhook %s: %s %s: %w", w.WebhookID, w.EventType, w.Status, ErrIgnored)
	}
	return e, nil
}

// classify maps a Truv webhook onto the service's outcomes.
func classify(w Webhook) (EventType, string) {
	if w.Product != ProductDepositSwitch {
		return "", ""
	}
	switch w.EventType {
	case EventTaskStatusUpdated:
		switch {
		case w.Status == StatusSwitchDeposit:
			return SwitchSubmitted, ""
		case w.Status == StatusDone:
			return SwitchConfirmed, ""
		case failedStatuses[w.Status]:
			return SwitchFailed, w.Status
		}
	case EventLinkDeleted:
		return SwitchReverted, EventLinkDeleted
	}
	return "", ""
}

// BuildEvent writes the Truv webhook body for an outcome: the inverse of
// ParseEvent, for the sandbox's stand-in Truv and the simulators. An empty
// ID gets a random one and a zero OccurredAt the current time; Product is
// always deposit_switch and the data source payroll. For SwitchFailed,
// Reason must be one of Truv's terminal error statuses ("error" when empty).
//
// Truv's pages name the fields but show no full example body, so the
// format of event_created_at (RFC 3339 in UTC, microseconds) is this
// package's choice; ParseEvent reads any RFC 3339 time.
func BuildEvent(e Event) ([]byte, error) {
	w := Webhook{
		WebhookID:  e.ID,
		UserID:     e.UserID,
		LinkID:     e.LinkID,
		TaskID:     e.TaskID,
		Product:    ProductDepositSwitch,
		DataSource: "payroll",
	}
	if w.WebhookID == "" {
		w.WebhookID = randomID()
	}
	at := e.OccurredAt
	if at.IsZero() {
		at = time.Now()
	}
	w.EventCreatedAt = FormatTime(at)
	if e.Reference != "" {
		ref := e.Reference
		w.TrackingInfo = &ref
	}
	switch e.Type {
	case SwitchSubmitted:
		w.EventType, w.Status = EventTaskStatusUpdated, StatusSwitchDeposit
	case SwitchConfirmed:
		w.EventType, w.Status = EventTaskStatusUpdated, StatusDone
	case SwitchFailed:
		w.EventType, w.Status = EventTaskStatusUpdated, e.Reason
		if w.Status == "" {
			w.Status = "error"
		}
		if !failedStatuses[w.Status] {
			return nil, fmt.Errorf("truv: build event: %q is not a Truv task error status", e.Reason)
		}
	case SwitchReverted:
		w.EventType, w.TaskID = EventLinkDeleted, ""
	default:
		return nil, fmt.Errorf("truv: build event: unknown type %q", e.Type)
	}
	if w.LinkID == "" {
		return nil, errors.New("truv: build event: link id is required, every task and link event carries one")
	}
	if w.EventType == EventTaskStatusUpdated && w.TaskID == "" {
		return nil, errors.New("truv: build event: task id is required on a task event")
	}
	return json.Marshal(w)
}

// randomID makes a webhook or object id in the form Truv's ids take in its
// examples: 32 lowercase hex digits.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FormatTime writes event_created_at the way BuildEvent does.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// NewID returns a fresh id of the form Truv uses, for the stand-in Truv.
func NewID() string { return randomID() }

// parseTime reads event_created_at. Truv calls it an ISO 8601 timestamp;
// both RFC 3339 and a time without a zone (read as UTC) are accepted.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("event_created_at is missing")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("event_created_at %q is not an ISO 8601 time", s)
}
