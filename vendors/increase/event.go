package increase

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// The event categories that announce an Inbound ACH Transfer: Increase sends
// the first when the transfer arrives (pending) and the second whenever it
// changes (accepted, declined, returned). Both are normalised the same way,
// from the transfer's state at the time it is fetched.
const (
	CategoryInboundACHTransferCreated = "inbound_ach_transfer.created"
	CategoryInboundACHTransferUpdated = "inbound_ach_transfer.updated"
)

// objectTypeInboundACHTransfer is the associated_object_type of those events.
const objectTypeInboundACHTransfer = "inbound_ach_transfer"

// Event is Increase's Event object, which is also the whole body of a
// webhook. It names the object that changed and carries nothing of it: the
// receiver fetches the object to learn what happened.
type Event struct {
	ID                   string    `json:"id"`
	CreatedAt            time.Time `json:"created_at"`
	Category             string    `json:"category"`
	AssociatedObjectType string    `json:"associated_object_type"`
	AssociatedObjectID   string    `json:"associated_object_id"`
	Type                 string    `json:"type"` // always "event"
}

// ErrMalformedEvent is a webhook body that is not an Increase Event. The
// signature was good, so the sender is Increase or holds its secret: the
// edge refuses it and logs it.
var ErrMalformedEvent = errors.New("increase: webhook body is not an Event")

// idForm is what an Increase object id looks like in every documented
// example ("event_001dzz0r20rzr4zrhrr1364hy80"): lower-case letters, digits
// and underscores. Holding ids to it keeps them safe in a URL path and a log.
// Increase's ids are about thirty characters; the bound leaves room for the
// sandbox's stand-in, whose transfer ids carry the sealed transfer.
var idForm = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)

// ParseEvent decodes a webhook body. Unknown fields are allowed, because
// Increase may add fields to its objects; the fields read must be present
// and well formed.
func ParseEvent(body []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: trailing data after the object", ErrMalformedEvent)
	}
	switch {
	case e.Type != "event":
		return Event{}, fmt.Errorf("%w: type is %q, not \"event\"", ErrMalformedEvent, e.Type)
	case !idForm.MatchString(e.ID):
		return Event{}, fmt.Errorf("%w: id %q", ErrMalformedEvent, e.ID)
	case e.Category == "":
		return Event{}, fmt.Errorf("%w: category is empty", ErrMalformedEvent)
	case e.CreatedAt.IsZero():
		return Event{}, fmt.Errorf("%w: created_at is missing", ErrMalformedEvent)
	}
	return e, nil
}

// TransferCreated is the Event Increase sends when the Inbound ACH Transfer
// transferID arrives at t. The sandbox's simulated deposits and the fake's
// (increasefake) announce their transfers with it: as in Increase's
// simulation without a resolve_at, the transfer is accepted at once, so the
// receiver fetches it accepted.
func TransferCreated(eventID, transferID string, t time.Time) Event {
	return Event{
		ID:                   eventID,
		CreatedAt:            t,
		Category:             CategoryInboundACHTransferCreated,
		AssociatedObjectType: objectTypeInboundACHTransfer,
		AssociatedObjectID:   transferID,
		Type:                 "event",
	}
}

// MarshalEvent is the webhook body Increase sends for e.
func MarshalEvent(e Event) ([]byte, error) {
	e.Type = "event"
	e.CreatedAt = e.CreatedAt.UTC()
	return json.Marshal(e)
}
