package stripeidentity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// DefaultBaseURL is Stripe's API host.
const DefaultBaseURL = "https://api.stripe.com"

// APIVersion is the Stripe-Version the client sends by default: the version
// stripe-go pinned when this package was written. Every field the package
// reads (id, status, url, last_error, metadata, livemode, created) has the
// same shape in every version that has Identity, so a newer account default
// does no harm; pinning keeps the answers stable.
const APIVersion = "2026-07-29.dahlia"

// DefaultTimeout bounds one call to Stripe when Config.Timeout is zero. A
// donor is waiting on a page while the session is created, so it is short.
const DefaultTimeout = 15 * time.Second

// ReferenceKey is the metadata key that carries the service's own reference
// (for example the donor session id) on every VerificationSession, and that
// comes back in every event about it.
const ReferenceKey = "reference"

// maxBody bounds what the client reads of an answer. A VerificationSession
// is a few kilobytes.
const maxBody = 1 << 20

// Config configures a Client.
type Config struct {
	// BaseURL is Stripe's API address; DefaultBaseURL when empty. Tests
	// point it at the fake.
	BaseURL string
	// SecretKey is a secret (sk_live_, sk_test_) or restricted (rk_live_,
	// rk_test_) key; Stripe takes it as a bearer token.
	SecretKey string
	// HTTPClient sends the requests; a client with no timeout of its own
	// when nil (Timeout bounds each call instead).
	HTTPClient *http.Client
	// Timeout bounds each call, on top of the caller's context;
	// DefaultTimeout when zero.
	Timeout time.Duration
	// APIVersion is sent as Stripe-Version; the constant APIVersion when
	// empty.
	APIVersion string
}

// Client calls Stripe Identity's VerificationSession API
// (docs.stripe.com/api/identity/verification_sessions). It is safe for
// concurrent use. It never logs; its errors never contain the key.
type Client struct {
	base    string
	key     string
	http    *http.Client
	timeout time.Duration
	version string
}

var keyForm = regexp.MustCompile(`^(sk|rk)_(live|test)_[0-9A-Za-z_]+$`)

// New checks the configuration and returns a client.
func New(cfg Config) (*Client, error) {
	if !keyForm.MatchString(cfg.SecretKey) {
		return nil, fmt.Errorf("stripe identity: %w: the secret key must be an sk_live_, sk_test_, rk_live_ or rk_test_ key", ErrInvalidParams)
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("stripe identity: %w: base URL %q is not an http(s) URL", ErrInvalidParams, base)
	}
	c := &Client{
		base:    strings.TrimRight(base, "/"),
		key:     cfg.SecretKey,
		http:    cfg.HTTPClient,
		timeout: cfg.Timeout,
		version: cfg.APIVersion,
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.version == "" {
		c.version = APIVersion
	}
	return c, nil
}

// CreateParams are what the service decides about a new session. There is
// deliberately no field for a phone number, an email or a name: Stripe
// would show provided details to the donor and keep them, and the service
// sends no personal data to a vendor that does not need it.
type CreateParams struct {
	// Reference is the service's own identifier for this verification (for
	// example the donor session id), sent as metadata[reference]. Required.
	Reference string
	// ReturnURL is where Stripe sends the donor after the hosted page.
	// Required, absolute http(s).
	ReturnURL string
	// IdempotencyKey is sent as Idempotency-Key so that a retry after a
	// timeout returns the same session instead of creating a second one.
	// Required, 1 to 255 visible ASCII characters.
	IdempotencyKey string
	// Metadata are further identifiers of the service's own (for example
	// church and donor ids). Values that look like a phone number or an
	// email address are refused.
	Metadata map[string]string
}

// CreateSession creates a document VerificationSession and returns it with
// the hosted page's URL to redirect the donor to
// (docs.stripe.com/api/identity/verification_sessions/create).
func (c *Client) CreateSession(ctx context.Context, p CreateParams) (Session, error) {
	const op = "create verification session"
	form, err := p.form()
	if err != nil {
		return Session{}, fmt.Errorf("stripe identity: %s: %w", op, err)
	}
	return c.do(ctx, op, http.MethodPost, "/v1/identity/verification_sessions", form, p.IdempotencyKey)
}

// RetrieveSession reads a session. While it requires input, Stripe answers
// with a fresh URL the donor can use to try again
// (docs.stripe.com/api/identity/verification_sessions/retrieve).
func (c *Client) RetrieveSession(ctx context.Context, id string) (Session, error) {
	const op = "retrieve verification session"
	if !sessionIDForm.MatchString(id) {
		return Session{}, fmt.Errorf("stripe identity: %s: %w: %q is not a session id", op, ErrInvalidParams, id)
	}
	return c.do(ctx, op, http.MethodGet, "/v1/identity/verification_sessions/"+id, nil, "")
}

// CancelSession cancels a session that still requires input, so that its
// URL can no longer be used, for example when the donor session it belongs
// to expires (docs.stripe.com/api/identity/verification_sessions/cancel).
// Stripe then sends identity.verification_session.canceled.
func (c *Client) CancelSession(ctx context.Context, id, idempotencyKey string) (Session, error) {
	const op = "cancel verification session"
	if !sessionIDForm.MatchString(id) {
		return Session{}, fmt.Errorf("stripe identity: %s: %w: %q is not a session id", op, ErrInvalidParams, id)
	}
	if !idempotencyKeyForm.MatchString(idempotencyKey) {
		return Session{}, fmt.Errorf("stripe identity: %s: %w: the idempotency key must be 1 to 255 visible ASCII characters", op, ErrInvalidParams)
	}
	return c.do(ctx, op, http.MethodPost, "/v1/identity/verification_sessions/"+id+"/cancel", url.Values{}, idempotencyKey)
}

var (
	sessionIDForm      = regexp.MustCompile(`^vs_[0-9A-Za-z]{1,250}$`)
	idempotencyKeyForm = regexp.MustCompile(`^[!-~]{1,255}$`)
	// phoneLike matches what could be a phone number in any common
	// notation: seven or more digits with only separators between them.
	phoneLike = regexp.MustCompile(`^\+?[0-9 ().\-/]+$`)
)

// Stripe's documented metadata limits (docs.stripe.com/metadata): 50 keys,
// keys up to 40 characters without square brackets, values up to 500.
const (
	maxMetadataKeys  = 50
	maxMetadataKey   = 40
	maxMetadataValue = 500
)

// form encodes the parameters the way Stripe's API takes them:
// application/x-www-form-urlencoded, nested keys in brackets.
func (p CreateParams) form() (url.Values, error) {
	if err := checkMetadataValue(ReferenceKey, p.Reference); err != nil {
		return nil, err
	}
	u, err := url.Parse(p.ReturnURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: return URL must be an absolute http(s) URL", ErrInvalidParams)
	}
	if !idempotencyKeyForm.MatchString(p.IdempotencyKey) {
		return nil, fmt.Errorf("%w: the idempotency key must be 1 to 255 visible ASCII characters", ErrInvalidParams)
	}
	if _, ok := p.Metadata[ReferenceKey]; ok {
		return nil, fmt.Errorf("%w: metadata key %q is Reference's", ErrInvalidParams, ReferenceKey)
	}
	if len(p.Metadata)+1 > maxMetadataKeys {
		return nil, fmt.Errorf("%w: at most %d metadata keys besides the reference", ErrInvalidParams, maxMetadataKeys-1)
	}
	f := url.Values{}
	f.Set("type", "document")
	f.Set("return_url", p.ReturnURL)
	f.Set("metadata["+ReferenceKey+"]", p.Reference)
	for k, v := range p.Metadata {
		if k == "" || len(k) > maxMetadataKey || strings.ContainsAny(k, "[]") {
			return nil, fmt.Errorf("%w: metadata key %q must be 1 to %d characters without brackets", ErrInvalidParams, k, maxMetadataKey)
		}
		if err := checkMetadataValue(k, v); err != nil {
			return nil, err
		}
		f.Set("metadata["+k+"]", v)
	}
	return f, nil
}

// checkMetadataValue keeps personal data out of what Stripe stores: Stripe
// asks for no sensitive information in metadata, and the service's own
// rule is that a donor's phone never reaches a vendor that does not need
// it. Identifiers pass; anything that reads as a phone or email is refused.
func checkMetadataValue(key, v string) error {
	if v == "" || len(v) > maxMetadataValue {
		return fmt.Errorf("%w: metadata %q must be 1 to %d characters", ErrInvalidParams, key, maxMetadataValue)
	}
	if strings.Contains(v, "@") {
		return fmt.Errorf("%w: metadata %q looks like an email address", ErrInvalidParams, key)
	}
	if phoneLike.MatchString(v) && countDigits(v) >= 7 {
		return fmt.Errorf("%w: metadata %q looks like a phone number", ErrInvalidParams, key)
	}
	return nil
}

func countDigits(s string) int {
	n := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			n++
		}
	}
	return n
}

// errorBody is Stripe's error envelope: {"error": {...}}.
type errorBody struct {
	Error *struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
}

// do sends one request and decodes a VerificationSession or an error.
func (c *Client) do(ctx context.Context, op, method, path string, form url.Values, idempotencyKey string) (Session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return Session{}, &Error{Op: op, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Stripe-Version", c.version)
	req.Header.Set("Accept", "application/json")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return Session{}, &Error{Op: op, Err: redactURL(err)}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	e := &Error{Op: op, HTTPStatus: res.StatusCode, RequestID: res.Header.Get("Request-Id")}
	if err != nil {
		e.Err = err
		return Session{}, e
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return Session{}, stripeError(e, res, raw)
	}
	var obj sessionObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		e.Err = fmt.Errorf("decode answer: %w", err)
		return Session{}, e
	}
	if obj.Object != sessionObjectName || obj.ID == "" {
		e.Err = fmt.Errorf("answer is not a verification session (object %q)", obj.Object)
		return Session{}, e
	}
	return obj.session(), nil
}

// stripeError fills e from Stripe's error body and decides its kind.
// Stripe-Should-Retry: true, which Stripe sends for example on lock
// timeouts, marks an answer retryable whatever its status, as stripe-go
// reads it. A "false" is not read the other way: on a 5xx it only means
// that the same idempotency key would replay the same failure.
func stripeError(e *Error, res *http.Response, raw []byte) error {
	var eb errorBody
	if err := json.Unmarshal(raw, &eb); err == nil && eb.Error != nil {
		e.Type, e.Code, e.Message, e.Param = eb.Error.Type, eb.Error.Code, eb.Error.Message, eb.Error.Param
	} else {
		e.Err = errors.New("answer carries no Stripe error object")
	}
	e.Refused = !retryableStatus(res.StatusCode) && res.Header.Get("Stripe-Should-Retry") != "true"
	return e
}

// redactURL drops the request URL from a transport error: it holds nothing
// secret today, but an error string should not depend on that staying so.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
