package sms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TwilioBaseURL is the Twilio Verify API's address.
const TwilioBaseURL = "https://verify.twilio.com"

// TwilioConfig names a Twilio account and its Verify service.
type TwilioConfig struct {
	// BaseURL defaults to TwilioBaseURL; tests point it at a local fake.
	BaseURL    string
	AccountSID string
	AuthToken  string
	ServiceSID string
}

// Complete reports whether the account, token and service are all set.
func (c TwilioConfig) Complete() bool {
	return c.AccountSID != "" && c.AuthToken != "" && c.ServiceSID != ""
}

// Twilio is the production verifier: Twilio Verify's Verifications and
// VerificationCheck endpoints, with HTTP basic auth (account SID and auth
// token). Twilio generates, sends and checks the code; it keeps one pending
// verification per phone for 10 minutes, matching domain.CodeLifetime.
type Twilio struct {
	cfg    TwilioConfig
	client *http.Client
}

// NewTwilio returns the Twilio verifier for cfg.
func NewTwilio(cfg TwilioConfig) (*Twilio, error) {
	if !cfg.Complete() {
		return nil, errors.New("twilio: account SID, auth token and service SID are required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = TwilioBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Twilio{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// Send starts a verification by SMS.
func (t *Twilio) Send(ctx context.Context, phone string) error {
	status, body, err := t.post(ctx, "Verifications", url.Values{"To": {phone}, "Channel": {"sms"}})
	if err != nil {
		return fmt.Errorf("twilio send: %w", err)
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return fmt.Errorf("twilio send: %w", errStatus(status, body))
	}
	return nil
}

// Check asks Twilio whether code approves the phone's pending
// verification. Twilio answers 404 when there is none (it expired, was
// already approved, or ran out of tries); for the donor that is a wrong code.
func (t *Twilio) Check(ctx context.Context, phone, code string) (bool, error) {
	status, body, err := t.post(ctx, "VerificationCheck", url.Values{"To": {phone}, "Code": {code}})
	if err != nil {
		return false, fmt.Errorf("twilio check: %w", err)
	}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("twilio check: %w", errStatus(status, body))
	}
	var out struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return false, fmt.Errorf("twilio check: decode answer: %w", err)
	}
	return out.Status == "approved", nil
}

// post sends a form to one of the service's endpoints. The answer's body is
// returned to the caller but never put in an error: Twilio's messages can
// quote the phone number.
func (t *Twilio) post(ctx context.Context, endpoint string, form url.Values) (int, []byte, error) {
	u := t.cfg.BaseURL + "/v2/Services/" + url.PathEscape(t.cfg.ServiceSID) + "/" + endpoint
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(t.cfg.AccountSID, t.cfg.AuthToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		// The error names the URL, which holds no phone.
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// errStatus describes a failed answer by its HTTP status and Twilio's
// numeric error code, never by its message.
func errStatus(status int, body []byte) error {
	var e struct {
		Code int `json:"code"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != 0 {
		return fmt.Errorf("HTTP status %d, Twilio error %d", status, e.Code)
	}
	return fmt.Errorf("HTTP status %d", status)
}
