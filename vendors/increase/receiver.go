package increase

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Transfers is where the receiver reads the transfer an event points at:
// *Client against Increase (or a fake of it), or whatever the sandbox keeps
// its simulated transfers in.
type Transfers interface {
	InboundACHTransfer(ctx context.Context, id string) (InboundACHTransfer, error)
}

// Receiver turns one webhook request from Increase into a Credit: verify,
// decode the Event, fetch the transfer it names, normalise.
type Receiver struct {
	// Secrets are the event subscription's shared secrets. A webhook signed
	// with any of them is accepted, so that a new secret can be added before
	// the old one is removed.
	Secrets [][]byte
	// Transfers fetches the transfer an event points at.
	Transfers Transfers
	// Now is the clock the timestamp is checked against; nil is time.Now.
	Now func() time.Time
}

// Receive handles one webhook: header and the raw body as received. Its
// error says what the edge should answer (see the package documentation):
// ErrInvalidSignature or ErrMalformedEvent refuse the request,
// ErrIgnored acknowledges it, ErrInvalidCredit refuses it for good,
// ErrUnavailable and ErrRejected from the fetch ask Increase to send it again.
func (r Receiver) Receive(ctx context.Context, header http.Header, body []byte) (Credit, error) {
	if err := r.verify(header, body); err != nil {
		return Credit{}, err
	}
	ev, err := ParseEvent(body)
	if err != nil {
		return Credit{}, err
	}
	if ev.Category != CategoryInboundACHTransferCreated && ev.Category != CategoryInboundACHTransferUpdated {
		return Credit{}, fmt.Errorf("%w: %s", ErrCategoryIgnored, ev.Category)
	}
	if ev.AssociatedObjectType != objectTypeInboundACHTransfer || !idForm.MatchString(ev.AssociatedObjectID) {
		return Credit{}, fmt.Errorf("%w: %s points at %s %q", ErrMalformedEvent, ev.Category, ev.AssociatedObjectType, ev.AssociatedObjectID)
	}
	if r.Transfers == nil {
		// A wiring mistake, not Increase's: answered like a refused key, so
		// Increase keeps the event until an operator fixes it.
		return Credit{}, fmt.Errorf("event %s: %w: the receiver has no transfer source", ev.ID, ErrRejected)
	}
	t, err := r.Transfers.InboundACHTransfer(ctx, ev.AssociatedObjectID)
	if err != nil {
		return Credit{}, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	if t.ID != ev.AssociatedObjectID {
		return Credit{}, fmt.Errorf("%w: event %s points at %s, Increase answered %s", ErrMalformedTransfer, ev.ID, ev.AssociatedObjectID, t.ID)
	}
	c, err := Normalise(ev.ID, t)
	if err != nil {
		return Credit{}, fmt.Errorf("event %s, transfer %s: %w", ev.ID, t.ID, err)
	}
	return c, nil
}

// verify accepts a webhook signed with any of the secrets, and otherwise
// reports the first secret's reason: they all see the same headers, so they
// fail the same way unless the signature alone differs.
func (r Receiver) verify(header http.Header, body []byte) error {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	if len(r.Secrets) == 0 {
		return ErrNoSecret
	}
	var first error
	for _, s := range r.Secrets {
		err := Verify(s, header, body, now)
		if err == nil {
			return nil
		}
		if first == nil || errors.Is(first, ErrNoSecret) {
			first = err
		}
	}
	return first
}
