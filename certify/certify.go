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

	"github.com/partnergiving/giving/sandbox"
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
	api    *sandbox.Client
	recv   *sandbox.Receiver
	checks []check

	endpointID string
	churchIDs  []string
	sessionID  string
	enrollment string
	activated  sandbox.Event
	// tests are the test deliveries already verified.
	tests map[string]bool
}

// Check reports a mistake in the options, before anything is sent.
func (o Options) Check() error {
	if _, err := sandbox.AbsoluteURL(o.BaseURL); err != nil {
		return fmt.Errorf("--base-url: %w", err)
	}
	if !strings.HasPrefix(o.APIKey, "sk_test_") {
		return errors.New("--api-key must be a sandbox key (sk_test_...): certification runs against a sandbox")
	}
	if o.WebhookURL != "" {
		if _, err := sandbox.AbsoluteURL(o.WebhookURL); err != nil {
			return fmt.Errorf("--webhook-url: %w", err)
		}
	}
	if _, err := sandbox.AbsoluteURL(o.RedirectURL); err != nil {
		return fmt.Errorf("--redirect-url: %w", err)
	}
	return nil
}

func newCertifier(f Options) (*certifier, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	api, err := sandbox.NewClient(f.BaseURL, f.APIKey)
	if err != nil {
		return nil, err
	}
	recv, err := sandbox.Listen(f.WebhookListen, nil)
	if err != nil {
		return nil, err
	}
	if f.WebhookURL == "" {
		f.WebhookURL = "http://" + recv.Addr() + "/webhooks"
	}
	f.BaseURL = api.Base
	return &certifier{f: f, api: api, recv: recv, tests: map[string]bool{}}, nil
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
		{1, "Register a webhook endpoint and receive a signed test delivery; rotate its secret and verify with the previous and the new one", c.stepEndpoint},
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

// close removes what the run created: it deletes its webhook endpoint and
// archives its churches (their enrollments stay, as every enrollment's
// history does). Then it stops the receiver.
func (c *certifier) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.endpointID != "" {
		_, _, _ = c.api.Call(ctx, http.MethodDelete, "/v1/webhook_endpoints/"+c.endpointID, nil)
	}
	for _, id := range c.churchIDs {
		_, _, _ = c.api.Call(ctx, http.MethodPost, "/v1/churches/"+id+"/archive", nil)
	}
	c.recv.Close()
}

func (c *certifier) stepEndpoint(ctx context.Context) (string, error) {
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := c.api.CallJSON(ctx, http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": c.f.WebhookURL, "event_types": []string{"*"}}, http.StatusCreated, &ep); err != nil {
		return "", err
	}
	c.endpointID = ep.ID
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		return "", fmt.Errorf("the endpoint's secret %q does not start with whsec_", ep.Secret)
	}
	c.recv.SetSecret(ep.Secret)
	first, err := c.testDelivery(ctx, ep.ID, "")
	if err != nil {
		return "", err
	}
	// A rotation with an overlap: a receiver still holding the previous
	// secret verifies a delivery, and so does one given the new secret,
	// which the rest of the run verifies with.
	var rotated struct {
		Secret string `json:"secret"`
	}
	if err := c.api.CallJSON(ctx, http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/rotate_secret", map[string]any{"expire_current_in": 600}, http.StatusOK, &rotated); err != nil {
		return "", err
	}
	if !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == ep.Secret {
		return "", fmt.Errorf("the rotated secret %q is not a new whsec_ secret", rotated.Secret)
	}
	old, err := c.testDelivery(ctx, ep.ID, "with the previous secret during the overlap")
	if err != nil {
		return "", err
	}
	c.recv.SetSecret(rotated.Secret)
	fresh, err := c.testDelivery(ctx, ep.ID, "with the new secret")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("endpoint %s, test events %s, %s (previous secret) and %s (new secret) verified", ep.ID, first, old, fresh), nil
}

// testDelivery asks for a test delivery to the endpoint and waits for the
// receiver to verify it, returning its event id; how says with what, for
// the failure's account.
func (c *certifier) testDelivery(ctx context.Context, endpoint, how string) (string, error) {
	var test struct {
		Delivered  bool    `json:"delivered"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}
	if err := c.api.CallJSON(ctx, http.MethodPost, "/v1/webhook_endpoints/"+endpoint+"/test", nil, http.StatusOK, &test); err != nil {
		return "", err
	}
	if how != "" {
		how = " " + how
	}
	if !test.Delivered {
		return "", fmt.Errorf("the test delivery to %s was not delivered%s: %s", c.f.WebhookURL, how, deliveryFailure(test.StatusCode, test.Error))
	}
	ev, err := c.recv.Await(ctx, c.f.Timeout, func(e sandbox.Event) bool { return e.Type == "webhook_endpoint.test" && !c.tests[e.ID] })
	if err != nil {
		return "", fmt.Errorf("no signed test delivery reached the receiver%s: %w", how, err)
	}
	c.tests[ev.ID] = true
	return ev.ID, nil
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
	if err := c.api.CallJSON(ctx, http.MethodPost, "/v1/churches/import", body, http.StatusOK, &out); err != nil {
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
	if err := c.api.CallJSON(ctx, http.MethodPost, "/v1/donor_sessions", body, http.StatusCreated, &s); err != nil {
		return "", redirectHint(err, c.f.RedirectURL)
	}
	c.sessionID = s.ID
	res, err := sandbox.CompleteFlow(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("hosted flow of session %s: %w", s.ID, err)
	}
	if !res.Completed() {
		return "", fmt.Errorf("hosted flow of session %s ended %s, not completed", s.ID, res.Status)
	}
	ev, err := c.awaitWebhook(ctx, "enrollment.created", func(e sandbox.Event) bool {
		return e.Type == "enrollment.created" && e.Payload["donor_session_id"] == s.ID
	})
	if err != nil {
		return "", err
	}
	c.enrollment, _ = ev.Payload["enrollment_id"].(string)
	return fmt.Sprintf("session %s, enrollment %s", s.ID, c.enrollment), nil
}

// redirectHint adds what to do to a refused session whose redirect_url
// was at fault: most often the partner's allowlist lacks the default's
// origin.
func redirectHint(err error, redirect string) error {
	if !strings.Contains(err.Error(), `"field":"redirect_url"`) {
		return err
	}
	return fmt.Errorf("%w\n%s is not on the partner's allowlisted redirect origins: pass --redirect-url with an https URL on one of them", err, redirect)
}

func (c *certifier) stepActivate(ctx context.Context) (string, error) {
	var sim struct {
		StatusCode int             `json:"status_code"`
		Problem    json.RawMessage `json:"problem"`
	}
	body := map[string]string{"enrollment_id": c.enrollment, "church_id": c.churchIDs[0]}
	if err := c.api.CallJSON(ctx, http.MethodPost, "/sandbox/simulate/payroll-connected", body, http.StatusOK, &sim); err != nil {
		return "", err
	}
	if sim.StatusCode/100 != 2 {
		return "", fmt.Errorf("the payroll webhook edge answered %d: %s", sim.StatusCode, sim.Problem)
	}
	ev, err := c.awaitWebhook(ctx, "enrollment.activated", func(e sandbox.Event) bool {
		return e.Type == "enrollment.activated" && e.Payload["enrollment_id"] == c.enrollment
	})
	if err != nil {
		return "", err
	}
	c.activated = ev
	return "event " + ev.ID, nil
}

// awaitWebhook waits for a verified delivery matching match. When none
// comes, the endpoint's delivery log says why: the receiver's answer or the
// error reaching it, or that nothing was attempted.
func (c *certifier) awaitWebhook(ctx context.Context, eventType string, match func(sandbox.Event) bool) (sandbox.Event, error) {
	ev, err := c.recv.Await(ctx, c.f.Timeout, match)
	if err == nil {
		return ev, nil
	}
	var log struct {
		Data []struct {
			EventType  string  `json:"event_type"`
			Outcome    string  `json:"outcome"`
			StatusCode *int    `json:"status_code"`
			Error      *string `json:"error"`
		} `json:"data"`
	}
	cause := "no attempt to deliver it is logged"
	if lerr := c.api.CallJSON(ctx, http.MethodGet, "/v1/webhook_endpoints/"+c.endpointID+"/deliveries", nil, http.StatusOK, &log); lerr != nil {
		cause = "the delivery log could not be read: " + lerr.Error()
	} else {
		for _, a := range log.Data { // newest first
			if a.EventType == eventType {
				cause = fmt.Sprintf("the last attempt to deliver it to %s: %s (outcome %s)", c.f.WebhookURL, deliveryFailure(a.StatusCode, a.Error), a.Outcome)
				break
			}
		}
	}
	return sandbox.Event{}, fmt.Errorf("%s did not reach the receiver (%v); %s", eventType, err, cause)
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
		if err := c.api.CallJSON(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return "", err
		}
		for _, raw := range page.Data {
			e, err := sandbox.ParseEvent(raw)
			if err != nil {
				return "", fmt.Errorf("feed item: %w", err)
			}
			if e.ID == c.activated.ID {
				found = true
				c.recv.Accept(e)
				if !bytes.Equal(raw, c.activated.Raw) {
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
	if err := c.api.CallJSON(ctx, http.MethodGet, "/v1/events?type=enrollment.activated&since_cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &again); err != nil {
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
	deliveries, unique, duplicates := c.recv.Counts()
	if duplicates == 0 {
		return "", fmt.Errorf("event %s, read from the feed after its webhook, was not recognised as a duplicate", c.activated.ID)
	}
	return fmt.Sprintf("%d webhook deliveries and 1 feed read of %d distinct events; %d duplicates were no-ops", deliveries, unique, duplicates), nil
}

// deliveryFailure says why a delivery failed: the service's account of
// it (the receiver's answer, or the error reaching it), else the status.
func deliveryFailure(status *int, errText *string) string {
	switch {
	case errText != nil && *errText != "":
		return *errText
	case status != nil:
		return fmt.Sprintf("the receiver answered %d", *status)
	}
	return "no reason given"
}
