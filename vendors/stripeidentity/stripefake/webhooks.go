package stripefake

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// eventJSON is Stripe's Event object (docs.stripe.com/api/events/object)
// in the field order of its documented example.
type eventJSON struct {
	ID              string         `json:"id"`
	Object          string         `json:"object"`
	APIVersion      string         `json:"api_version"`
	Created         int64          `json:"created"`
	Data            eventData      `json:"data"`
	Livemode        bool           `json:"livemode"`
	PendingWebhooks int            `json:"pending_webhooks"`
	Request         map[string]any `json:"request"`
	Type            string         `json:"type"`
}

type eventData struct {
	Object sessionJSON `json:"object"`
}

// event renders and records an event about vs as it is now. The caller
// holds the lock.
func (s *Server) event(vs *session, typ string) Event {
	ev := eventJSON{
		ID: stripeidentity.NewID("evt_"), Object: "event", APIVersion: stripeidentity.APIVersion,
		Created: s.cfg.Now().Unix(), Data: eventData{Object: vs.object(true)}, Livemode: vs.livemode,
		PendingWebhooks: 1, Request: map[string]any{"id": nil, "idempotency_key": nil}, Type: typ,
	}
	e := Event{ID: ev.ID, Type: typ, SessionID: vs.id, Body: mustJSON(ev)}
	s.events = append(s.events, e)
	return e
}

// deliver POSTs events in order, each signed at the moment it is sent, and
// records what the receiver answered. The caller does not hold the lock:
// the receiver may call the fake's API while handling a webhook.
func (s *Server) deliver(events []Event) {
	if s.cfg.WebhookURL == "" {
		return
	}
	for _, e := range events {
		d := s.post(e)
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
	}
}

func (s *Server) post(e Event) Delivery {
	d := Delivery{EventID: e.ID, Type: e.Type, Signature: stripeidentity.Sign(s.cfg.WebhookSecret, e.Body, s.cfg.Now())}
	req, err := http.NewRequest(http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(e.Body))
	if err != nil {
		d.Err = err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set(stripeidentity.SignatureHeader, d.Signature)
	res, err := s.cfg.WebhookClient.Do(req)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	d.Status = res.StatusCode
	return d
}

// Resend delivers an event already sent once more, newly signed, as Stripe
// does when it retries, and returns the receiver's status.
func (s *Server) Resend(eventID string) (int, error) {
	s.mu.Lock()
	var found *Event
	for i := range s.events {
		if s.events[i].ID == eventID {
			found = &s.events[i]
		}
	}
	s.mu.Unlock()
	if found == nil {
		return 0, fmt.Errorf("stripefake: no event %s", eventID)
	}
	if s.cfg.WebhookURL == "" {
		return 0, fmt.Errorf("stripefake: no webhook URL configured")
	}
	d := s.post(*found)
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	s.mu.Unlock()
	if d.Err != "" {
		return 0, fmt.Errorf("stripefake: resend %s: %s", eventID, d.Err)
	}
	return d.Status, nil
}
