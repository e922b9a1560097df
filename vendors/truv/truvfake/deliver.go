package truvfake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/partnergiving/giving/vendors/truv"
)

// Delivery is one webhook the fake sent (or would have sent, with no
// webhook URL set) and what the receiver answered.
type Delivery struct {
	Event  truv.Event // as built; VendorType and Status filled from the body
	Body   []byte
	Header http.Header
	URL    string
	Status int   // the receiver's status; 0 when nothing answered
	Err    error // why nothing answered
}

// ErrNoWebhookURL: a webhook was built but the fake has nowhere to send it.
var ErrNoWebhookURL = errors.New("truvfake: no webhook URL set")

// Send builds the Truv webhook for e, signs it with the account's secret
// and POSTs it to the webhook URL, the way Truv delivers: a JSON body,
// X-WEBHOOK-SIGN, Truv's User-Agent. It returns the delivery with the
// receiver's status; an error only when the webhook could not be built.
func (f *Fake) Send(ctx context.Context, e truv.Event) (Delivery, error) {
	body, err := truv.BuildEvent(e)
	if err != nil {
		return Delivery{}, fmt.Errorf("truvfake: send: %w", err)
	}
	return f.deliver(ctx, body), nil
}

// SendRaw signs and POSTs a body as it is, for replaying a fixture.
func (f *Fake) SendRaw(ctx context.Context, body []byte) Delivery {
	return f.deliver(ctx, body)
}

// Deliveries returns the webhooks sent so far, oldest first.
func (f *Fake) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Delivery(nil), f.deliveries...)
}

func (f *Fake) deliver(ctx context.Context, body []byte) Delivery {
	d := Delivery{Body: body, Header: truv.Sign(f.cfg.Secret, body)}
	if e, err := truv.ParseEvent(body); err == nil || errors.Is(err, truv.ErrIgnored) {
		d.Event = e
	}
	f.mu.Lock()
	d.URL = f.webhookURL
	f.mu.Unlock()
	if d.URL == "" {
		d.Err = ErrNoWebhookURL
	} else {
		d.Status, d.Err = f.post(ctx, d.URL, d.Header, body)
	}
	if f.cfg.Forget {
		return d
	}
	f.mu.Lock()
	f.deliveries = append(f.deliveries, d)
	if len(f.deliveries) > maxRecorded {
		f.deliveries = f.deliveries[len(f.deliveries)-maxRecorded:]
	}
	f.mu.Unlock()
	return d
}

func (f *Fake) post(ctx context.Context, url string, h http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = h.Clone()
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, nil
}
