package certify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/segmentio/ksuid"
)

// Options configure a certification run.
type Options struct {
	// BaseURL is the sandbox's base URL.
	BaseURL string
	// APIKey is a sandbox key (sk_test_...).
	APIKey string
	// WebhookListen is the address the local receiver listens on.
	WebhookListen string
	// WebhookURL is where the sandbox reaches the receiver (default
	// http://<WebhookListen>/webhooks).
	WebhookURL string
	// RedirectURL is the donor session's redirect_url; it must be on the
	// partner's allowlisted origins.
	RedirectURL string
	// Timeout bounds the wait for each webhook.
	Timeout time.Duration
}

// Run runs the sequence, writes the checklist to out, and reports whether
// every step passed. err is set when the run could not start at all.
func Run(ctx context.Context, opts Options, out io.Writer) (passed bool, err error) {
	c, err := newCertifier(opts)
	if err != nil {
		return false, err
	}
	defer c.close()
	c.run(ctx)
	c.report(out)
	return !c.failed(), nil
}

type check struct {
	step   int
	name   string
	ok     bool
	reason string
}

type certifier struct {
	f      Options
	api    *http.Client
	recv   *certReceiver
	checks []check

	endpointID string
	churchIDs  []string
	sessionID  string
	enrollment string
	activated  certEvent
}

func newCertifier(f Options) (*certifier, error) {
	recv, err := startCertReceiver(f.WebhookListen)
	if err != nil {
		return nil, err
	}
	if f.WebhookURL == "" {
		f.WebhookURL = "http://" + recv.addr + "/webhooks"
	}
	f.BaseURL = strings.TrimRight(f.BaseURL, "/")
	return &certifier{f: f, api: &http.Client{Timeout: 30 * time.Second}, recv: recv}, nil
}

func (c *certifier) pass(step int, name, detail string) {
	c.checks = append(c.checks, check{step: step, name: name, ok: true, reason: detail})
}

func (c *certifier) fail(step int, name string, err error) {
	c.checks = append(c.checks, check{step: step, name: name, reason: err.Error()})
}

func (c *certifier) failed() bool {
	for _, ch := range c.checks {
		if !ch.ok {
			return true
		}
	}
	return len(c.checks) == 0
}

func (c *certifier) report(w io.Writer) {
	fmt.Fprintf(w, "Certification against %s\n\n", c.f.BaseURL)
	for _, ch := range c.checks {
		mark := "PASS"
		if !ch.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "[%s] %d. %s", mark, ch.step, ch.name)
		if ch.reason != "" {
			fmt.Fprintf(w, ": %s", ch.reason)
		}
		fmt.Fprintln(w)
	}
	if c.failed() {
		fmt.Fprintln(w, "\nResult: FAILED")
		return
	}
	fmt.Fprintln(w, "\nResult: CERTIFIED")
}

// run goes through the six steps, stopping at the first that fails, since
// each builds on the one before.
func (c *certifier) run(ctx context.Context) {
	steps := []struct {
		n    int
		name string
		do   func(context.Context) (string, error)
	}{
		{1, "Register a webhook endpoint and receive a signed test delivery", c.stepEndpoint},
		{2, "Import churches and keep their ids", c.stepImport},
		{3, "Complete the hosted flow with a seed donor; enrollment.created arrives on the webhook", c.stepFlow},
		{4, "Simulate payroll-connected; enrollment.activated arrives on the webhook", c.stepActivate},
		{5, "Read the feed for enrollment.activated and poll on with the stored cursor", c.stepFeed},
		{6, "Deduplicate by event_id across retries and channels", c.stepDedup},
	}
	for _, s := range steps {
		detail, err := s.do(ctx)
		if err != nil {
			c.fail(s.n, s.name, err)
			return
		}
		c.pass(s.n, s.name, detail)
	}
}

// close deletes what the run registered and stops the receiver.
func (c *certifier) close() {
	if c.endpointID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, _ = c.call(ctx, http.MethodDelete, "/v1/webhook_endpoints/"+c.endpointID, nil)
	}
	c.recv.close()
}

// call sends an API request; POSTs carry a fresh Idempotency-Key.
func (c *certifier) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.f.BaseURL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.f.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", "certify-"+ksuid.New().String())
	}
	resp, err := c.api.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, data, err
}

// callJSON sends a request, requires status want, and decodes the answer.
func (c *certifier) callJSON(ctx context.Context, method, path string, body any, want int, out any) error {
	code, data, err := c.call(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if code != want {
		return fmt.Errorf("%s %s answered %d, want %d: %s", method, path, code, want, firstLine(data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (c *certifier) stepEndpoint(ctx context.Context) (string, error) {
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": c.f.WebhookURL, "event_types": []string{"*"}}, http.StatusCreated, &ep); err != nil {
		return "", err
	}
	c.endpointID = ep.ID
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		return "", fmt.Errorf("the endpoint's secret %q does not start with whsec_", ep.Secret)
	}
	c.recv.setSecret(ep.Secret)
	var test struct {
		Delivered bool `json:"delivered"`
	}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, http.StatusOK, &test); err != nil {
		return "", err
	}
	if !test.Delivered {
		return "", errors.New("the test delivery answered delivered: false")
	}
	ev, err := c.recv.await(ctx, c.f.Timeout, func(e certEvent) bool { return e.Type == "webhook_endpoint.test" })
	if err != nil {
		return "", fmt.Errorf("no signed test delivery reached the receiver: %w", err)
	}
	return fmt.Sprintf("endpoint %s, test event %s verified", ep.ID, ev.ID), nil
}

func (c *certifier) stepImport(ctx context.Context) (string, error) {
	var out struct {
		Results []struct {
			Status string `json:"status"`
			Church *struct {
				ID string `json:"id"`
			} `json:"church"`
		} `json:"results"`
	}
	body := map[string]any{"churches": []map[string]string{{"name": "Certification Church A"}, {"name": "Certification Church B"}}}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/churches/import", body, http.StatusOK, &out); err != nil {
		return "", err
	}
	for i, r := range out.Results {
		if r.Status != "created" || r.Church == nil {
			return "", fmt.Errorf("row %d was %s", i, r.Status)
		}
		c.churchIDs = append(c.churchIDs, r.Church.ID)
	}
	if len(c.churchIDs) != 2 {
		return "", fmt.Errorf("%d results for 2 rows", len(out.Results))
	}
	return strings.Join(c.churchIDs, ", "), nil
}

func (c *certifier) stepFlow(ctx context.Context) (string, error) {
	var s struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	body := map[string]any{"church_id": c.churchIDs[0], "donor_phone": "+12025550100", "mode": "pct", "value": 3, "redirect_url": c.f.RedirectURL}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/donor_sessions", body, http.StatusCreated, &s); err != nil {
		return "", err
	}
	c.sessionID = s.ID
	if err := completeFlow(ctx, s.URL); err != nil {
		return "", fmt.Errorf("hosted flow: %w", err)
	}
	ev, err := c.recv.await(ctx, c.f.Timeout, func(e certEvent) bool {
		return e.Type == "enrollment.created" && e.Payload["donor_session_id"] == s.ID
	})
	if err != nil {
		return "", fmt.Errorf("enrollment.created did not arrive: %w", err)
	}
	c.enrollment, _ = ev.Payload["enrollment_id"].(string)
	return fmt.Sprintf("session %s, enrollment %s", s.ID, c.enrollment), nil
}

func (c *certifier) stepActivate(ctx context.Context) (string, error) {
	var sim struct {
		StatusCode int `json:"status_code"`
	}
	body := map[string]string{"enrollment_id": c.enrollment, "church_id": c.churchIDs[0]}
	if err := c.callJSON(ctx, http.MethodPost, "/sandbox/simulate/payroll-connected", body, http.StatusOK, &sim); err != nil {
		return "", err
	}
	if sim.StatusCode/100 != 2 {
		return "", fmt.Errorf("the webhook edge answered %d", sim.StatusCode)
	}
	ev, err := c.recv.await(ctx, c.f.Timeout, func(e certEvent) bool {
		return e.Type == "enrollment.activated" && e.Payload["enrollment_id"] == c.enrollment
	})
	if err != nil {
		return "", fmt.Errorf("enrollment.activated did not arrive: %w", err)
	}
	c.activated = ev
	return "event " + ev.ID, nil
}

type feedPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor string            `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

func (c *certifier) stepFeed(ctx context.Context) (string, error) {
	cursor, found := "", false
	for {
		path := "/v1/events?type=enrollment.activated&limit=1000"
		if cursor != "" {
			path += "&since_cursor=" + url.QueryEscape(cursor)
		}
		var page feedPage
		if err := c.callJSON(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return "", err
		}
		for _, raw := range page.Data {
			var e certEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				return "", fmt.Errorf("feed item: %w", err)
			}
			if e.ID == c.activated.ID {
				found = true
				c.recv.accept(e)
				if !bytes.Equal(raw, c.activated.raw) {
					return "", errors.New("the feed item differs from the webhook body for the same event")
				}
			}
		}
		if page.NextCursor == "" {
			return "", errors.New("the feed answered without next_cursor")
		}
		cursor = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	if !found {
		return "", fmt.Errorf("event %s is not on the feed", c.activated.ID)
	}
	// Poll on from the stored cursor: nothing new, and the same position.
	var again feedPage
	if err := c.callJSON(ctx, http.MethodGet, "/v1/events?type=enrollment.activated&since_cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &again); err != nil {
		return "", err
	}
	if len(again.Data) != 0 || again.NextCursor != cursor {
		return "", errors.New("polling with the stored cursor did not resume after it")
	}
	return "found " + c.activated.ID + "; cursor stored and polled", nil
}

func (c *certifier) stepDedup(ctx context.Context) (string, error) {
	// enrollment.activated came twice, pushed and pulled, with one event_id;
	// the integration acts on it once. Webhook retries are dropped the same
	// way.
	deliveries, unique, duplicates := c.recv.counts()
	if duplicates == 0 {
		return "", fmt.Errorf("event %s, read from the feed after its webhook, was not recognised as a duplicate", c.activated.ID)
	}
	return fmt.Sprintf("%d webhook deliveries and 1 feed read of %d distinct events; %d duplicates were no-ops", deliveries, unique, duplicates), nil
}

// certEvent is an envelope as the receiver saw it.
