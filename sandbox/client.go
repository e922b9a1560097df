package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/segmentio/ksuid"
)

// Client calls the partner API with one key.
type Client struct {
	// Base is the service's base URL, e.g. http://127.0.0.1:8080.
	Base string
	// Key is the API key, sk_test_... on the sandbox.
	Key  string
	HTTP *http.Client
}

// NewClient checks base and returns a client for it.
func NewClient(base, key string) (*Client, error) {
	if _, err := AbsoluteURL(base); err != nil {
		return nil, err
	}
	return &Client{Base: strings.TrimRight(base, "/"), Key: key, HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Call sends a request with body as JSON (when not nil); POSTs carry a
// fresh Idempotency-Key, as PATCHes do. It returns the status and the body.
func (c *Client) Call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost || method == http.MethodPatch {
		req.Header.Set("Idempotency-Key", "sandbox-"+ksuid.New().String())
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, c.unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, data, err
}

// unreachable names the likely cause when the service did not answer.
func (c *Client) unreachable(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("the service at %s could not be reached (is it running, and is that its address?): %w", c.Base, err)
	}
	return err
}

// CallJSON sends a request, requires status want, and decodes the answer
// into out (when not nil). Another status is an error quoting the answer,
// so a problem's detail reaches whoever reads the error.
func (c *Client) CallJSON(ctx context.Context, method, path string, body any, want int, out any) error {
	code, data, err := c.Call(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if code != want {
		return fmt.Errorf("%s %s answered %d, want %d: %s", method, path, code, want, clip(data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// SessionEnrollment waits up to timeout for the donor session's enrollment
// and returns its id. A session that did not complete has none.
func (c *Client) SessionEnrollment(ctx context.Context, sessionID string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		var s struct {
			Status       string  `json:"status"`
			EnrollmentID *string `json:"enrollment_id"`
		}
		if err := c.CallJSON(ctx, http.MethodGet, "/v1/donor_sessions/"+sessionID, nil, http.StatusOK, &s); err != nil {
			return "", err
		}
		if s.EnrollmentID != nil && *s.EnrollmentID != "" {
			return *s.EnrollmentID, nil
		}
		if s.Status != "completed" && s.Status != "open" {
			return "", fmt.Errorf("session %s is %s and has no enrollment", sessionID, s.Status)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("session %s has no enrollment after %s", sessionID, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
