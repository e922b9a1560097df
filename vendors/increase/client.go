package increase

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
)

// The base URLs of Increase's two environments, as the official SDKs name
// them. Sandbox keys work only against the sandbox and live keys only
// against production.
const (
	ProductionBaseURL = "https://api.increase.com"
	SandboxBaseURL    = "https://sandbox.increase.com"
)

// maxResponse bounds what the client reads from Increase: an Inbound ACH
// Transfer is a few kilobytes.
const maxResponse = 1 << 20

// defaultTimeout bounds one call when the caller's http.Client has none: a
// webhook waits on this call, and Increase will send the event again.
const defaultTimeout = 10 * time.Second

// ErrUnavailable is a call that may succeed later: Increase could not be
// reached, timed out, answered 5xx, or asked to slow down (429, 408, 409 are
// the statuses Increase's SDKs retry). The edge should answer the webhook with
// a 5xx so that Increase sends it again.
var ErrUnavailable = errors.New("increase: API unavailable")

// ErrRejected is a call Increase refused for good: a 4xx other than those
// above, e.g. an unknown object or a key that is wrong, revoked or for the
// other environment. Retrying the same call will not help; an operator must.
var ErrRejected = errors.New("increase: API refused the request")

// APIError is Increase's error object, with the HTTP status it came with. It
// unwraps to ErrUnavailable or ErrRejected.
type APIError struct {
	StatusCode int    `json:"-"`
	Type       string `json:"type"`   // e.g. object_not_found_error, invalid_api_key_error
	Title      string `json:"title"`  // a sentence for a human
	Detail     string `json:"detail"` // more of it, may be empty
	Reason     string `json:"reason"` // for authentication errors, e.g. no_header
	ResourceID string `json:"resource_id"`
	RetryAfter *int64 `json:"retry_after"` // seconds, for rate limits
}

func (e *APIError) Error() string {
	return fmt.Sprintf("increase: %d %s: %s", e.StatusCode, e.Type, e.Title)
}

// Unwrap says whether the call may be retried.
func (e *APIError) Unwrap() error {
	if retryable(e.StatusCode) {
		return ErrUnavailable
	}
	return ErrRejected
}

// retryable is the statuses Increase's SDKs retry.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// Client calls Increase's API with a secret API key. It reads transfers and
// opens account numbers; it never moves money.
type Client struct {
	base   *url.URL
	apiKey string
	http   *http.Client
}

// NewClient returns a client for the API at baseURL (ProductionBaseURL,
// SandboxBaseURL, or a fake's URL in tests) that authenticates with apiKey as
// a bearer token. hc may be nil; without a timeout of its own, each call is
// bounded by ten seconds.
func NewClient(baseURL, apiKey string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("increase: base URL %q must be an absolute http(s) URL", baseURL)
	}
	if apiKey == "" {
		return nil, errors.New("increase: API key is empty")
	}
	if hc == nil {
		hc = &http.Client{}
	}
	if hc.Timeout == 0 {
		bounded := *hc
		bounded.Timeout = defaultTimeout
		hc = &bounded
	}
	return &Client{base: u, apiKey: apiKey, http: hc}, nil
}

// InboundACHTransfer retrieves an Inbound ACH Transfer:
// GET /inbound_ach_transfers/{id}.
func (c *Client) InboundACHTransfer(ctx context.Context, id string) (InboundACHTransfer, error) {
	var t InboundACHTransfer
	if !idForm.MatchString(id) {
		return t, fmt.Errorf("%w: inbound ACH transfer id %q is not an Increase id", ErrRejected, id)
	}
	if err := c.get(ctx, "/inbound_ach_transfers/"+id, &t); err != nil {
		return t, fmt.Errorf("retrieve inbound ACH transfer %s: %w", id, err)
	}
	return t, nil
}

// get sends one authenticated GET and decodes a 2xx answer into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, "", out)
}

// do sends one authenticated request, body (when not nil) as JSON under
// idempotencyKey (when not empty), and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, body any, idempotencyKey string, out any) error {
	u := c.base.JoinPath(path)
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	res, err := c.http.Do(req)
	if err != nil {
		// The error names the URL, never the key, which is in a header.
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%w: reading the answer: %v", ErrUnavailable, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return apiError(res.StatusCode, answer)
	}
	if err := json.NewDecoder(bytes.NewReader(answer)).Decode(out); err != nil {
		// A 2xx Increase cannot be read is Increase's fault, maybe a proxy's:
		// worth another try later, not a reason to drop the deposit.
		return fmt.Errorf("%w: answer is not the documented object: %v", ErrUnavailable, err)
	}
	return nil
}

// apiError reads Increase's error object; a body that is not one (a proxy's
// page, say) still yields an APIError with the status.
func apiError(status int, body []byte) *APIError {
	e := &APIError{}
	if json.Unmarshal(body, e) != nil || e.Type == "" {
		e = &APIError{Type: "unreadable_error", Title: http.StatusText(status)}
	}
	e.StatusCode = status
	return e
}
