package increasefake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/partnergiving/giving/vendors/increase"
)

// Delivery is the story of one Event's webhook: each attempt's answer, and
// whether one of them was a 2xx.
type Delivery struct {
	EventID   string
	Attempts  []Attempt
	Delivered bool
}

// Attempt is one POST of a webhook: the receiver's status, or the error
// that kept it from answering.
type Attempt struct {
	At     time.Time
	Status int
	Err    string
}

// Deliveries returns the webhooks sent or being sent, oldest first.
func (f *Fake) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Delivery, len(f.deliveries))
	for i, d := range f.deliveries {
		out[i] = *d
		out[i].Attempts = append([]Attempt(nil), d.Attempts...)
	}
	return out
}

// Deliver POSTs e to the webhook URL until the receiver answers 2xx or the
// retries run out, waiting Options.Retries between attempts. Each attempt is
// signed afresh, so a retry carries a current timestamp; the webhook-id stays
// the same, as the Standard Webhooks scheme asks, so a receiver can tell a
// retry from a new event. Any status outside 2xx counts as a failure, as at
// Increase.
func (f *Fake) Deliver(ctx context.Context, e increase.Event) Delivery {
	d := &Delivery{EventID: e.ID}
	f.mu.Lock()
	f.deliveries = append(f.deliveries, d)
	f.mu.Unlock()
	body, err := increase.MarshalEvent(e)
	if err != nil {
		f.record(d, Attempt{At: f.opts.Now(), Err: err.Error()}, false)
		return f.snapshot(d)
	}
	for i := 0; ; i++ {
		status, err := Post(ctx, f.opts.HTTPClient, f.opts.WebhookURL, f.opts.WebhookSecret, e.ID, body, f.opts.Now())
		a := Attempt{At: f.opts.Now(), Status: status}
		if err != nil {
			a.Err = err.Error()
		}
		ok := err == nil && status >= 200 && status <= 299
		f.record(d, a, ok)
		if ok || i >= len(f.opts.Retries) {
			return f.snapshot(d)
		}
		select {
		case <-ctx.Done():
			return f.snapshot(d)
		case <-time.After(f.opts.Retries[i]):
		}
	}
}

func (f *Fake) record(d *Delivery, a Attempt, delivered bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d.Attempts = append(d.Attempts, a)
	d.Delivered = d.Delivered || delivered
}

func (f *Fake) snapshot(d *Delivery) Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := *d
	out.Attempts = append([]Attempt(nil), d.Attempts...)
	return out
}

// Post makes one attempt at a webhook: body signed with secret under msgID
// at now, POSTed to url. It returns the receiver's status. The simulators
// and the tests use it to send exactly what Increase sends, once.
func Post(ctx context.Context, hc *http.Client, url string, secret []byte, msgID string, body []byte, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook to %s: %w", url, err)
	}
	for k, v := range increase.Sign(secret, msgID, body, now) {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "increasefake")
	res, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook to %s: %w", url, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, nil
}
