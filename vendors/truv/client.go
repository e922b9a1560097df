package truv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is Truv's API host. Truv serves sandbox, development and
// production from the same host; the access secret picks the environment
// ("All API requests use the https://prod.truv.com/v1/ base, regardless of
// the environment", docs.truv.com/reference).
const DefaultBaseURL = "https://prod.truv.com"

// DefaultTimeout bounds one call to Truv when Config.Timeout is zero. A
// donor is waiting on the page that needs the bridge token, so a slow Truv
// must turn into an answer quickly rather than hold the request.
const DefaultTimeout = 10 * time.Second

// ProductDepositSwitch is the bridge token product_type for a direct
// deposit switch (Create a bridge token, docs.truv.com/reference/users_tokens).
const ProductDepositSwitch = "deposit_switch"

// maxAnswer bounds how much of an answer is read: enough for Truv's
// objects, not an unbounded page from a proxy in the way.
const maxAnswer = 64 << 10

// Config configures a Client. ClientID and Secret are the values Truv's
// dashboard shows under Development → API Keys.
type Config struct {
	// BaseURL is Truv's API host without the /v1 path; DefaultBaseURL when
	// empty. Tests and the sandbox point it at truvfake.
	BaseURL string
	// ClientID is sent as X-Access-Client-Id.
	ClientID string
	// Secret is the environment's access secret, sent as X-Access-Secret.
	// Truv signs its webhooks with the same secret (see Verifier).
	Secret string
	// ClientName is the organisation name Truv Bridge shows the donor
	// (client_name on the bridge token), unless a SwitchRequest names one.
	ClientName string
	// HTTPClient sends the requests; a plain client when nil. Its own
	// Timeout, if any, still applies.
	HTTPClient *http.Client
	// Timeout bounds each call; DefaultTimeout when zero.
	Timeout time.Duration
}

// Client calls Truv's API for the one thing the service needs from it:
// a bridge token that opens Truv Bridge on a direct deposit switch to a
// church's account. It is safe for concurrent use.
type Client struct {
	base       *url.URL
	clientID   string
	secret     string
	clientName string
	http       *http.Client
	timeout    time.Duration
}

// New checks the configuration and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("truv: base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.ClientID == "" || cfg.Secret == "" {
		return nil, errors.New("truv: client id and access secret are both required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Client{
		base:       base,
		clientID:   cfg.ClientID,
		secret:     cfg.Secret,
		clientName: cfg.ClientName,
		http:       cfg.HTTPClient,
		timeout:    cfg.Timeout,
	}, nil
}

// AccountType is the target account's type, as Truv's account.account_type
// takes it.
type AccountType string

// The account types Truv's deposit switch takes.
const (
	Checking AccountType = "checking"
	Savings  AccountType = "savings"
)

// Account is the deposit account the switch sends money to: the church's
// account at its bank. BankName is shown to the donor in Truv Bridge.
type Account struct {
	RoutingNumber string
	AccountNumber string
	Type          AccountType
	BankName      string
}

var (
	routingForm = regexp.MustCompile(`^[0-9]{9}$`)
	// NACHA allows up to 17 characters in a receiving account number.
	accountForm = regexp.MustCompile(`^[0-9A-Za-z-]{1,17}$`)
)

// Validate refuses an account Truv could not deposit into, before sending.
func (a Account) Validate() error {
	switch {
	case !routingForm.MatchString(a.RoutingNumber):
		return fmt.Errorf("%w: routing number must be 9 digits", ErrInvalidRequest)
	case !accountForm.MatchString(a.AccountNumber):
		return fmt.Errorf("%w: account number must be 1 to 17 letters, digits or dashes", ErrInvalidRequest)
	case a.Type != Checking && a.Type != Savings:
		return fmt.Errorf("%w: account type must be %q or %q, got %q", ErrInvalidRequest, Checking, Savings, a.Type)
	case strings.TrimSpace(a.BankName) == "":
		return fmt.Errorf("%w: bank name is required, Truv Bridge shows it to the donor", ErrInvalidRequest)
	}
	return nil
}

// SwitchRequest is everything needed to open Truv Bridge on one donor's
// switch. It carries no name, phone or email: Truv gets the donor id and
// nothing that identifies the person.
type SwitchRequest struct {
	// UserID is the Truv user created by an earlier attempt for the same
	// donor. Truv documents no idempotency key, so a retry that passes the
	// user id it got the first time does not create a second Truv user.
	// Empty creates one.
	UserID string
	// EndUserID is the service's donor id, sent as external_user_id.
	EndUserID string
	// Reference is echoed back by Truv as tracking_info on link and task
	// webhooks; the service puts the enrollment id there so a webhook finds
	// its enrollment. Empty sends EndUserID.
	Reference string
	// ClientName overrides Config.ClientName for this donor: the name Truv
	// Bridge shows (the partner's or the church's display name).
	ClientName string
	Target     Account
	Allocation Allocation
}

// Switch is an opened switch: the Truv user it belongs to (keep it, to
// retry without a second user) and the bridge token that opens Truv Bridge.
// A bridge token is short-lived (Truv documents six hours): create a new
// one rather than store it.
type Switch struct {
	UserID      string
	BridgeToken string
}

var idForm = regexp.MustCompile(`^[!-~]{1,255}$`)

// StartSwitch creates the Truv user (unless the request names one) and a
// deposit_switch bridge token carrying the allocation and the target
// account.
func (c *Client) StartSwitch(ctx context.Context, r SwitchRequest) (Switch, error) {
	if err := r.Target.Validate(); err != nil {
		return Switch{}, err
	}
	if err := r.Allocation.Validate(); err != nil {
		return Switch{}, err
	}
	if !idForm.MatchString(r.EndUserID) {
		return Switch{}, fmt.Errorf("%w: end user id must be 1 to 255 visible characters", ErrInvalidRequest)
	}
	userID := r.UserID
	if userID == "" {
		u, err := c.CreateUser(ctx, r.EndUserID)
		if err != nil {
			return Switch{}, err
		}
		userID = u.ID
	}
	ref := r.Reference
	if ref == "" {
		ref = r.EndUserID
	}
	name := r.ClientName
	if name == "" {
		name = c.clientName
	}
	tok, err := c.CreateBridgeToken(ctx, userID, BridgeTokenRequest{
		ProductType:  ProductDepositSwitch,
		ClientName:   name,
		TrackingInfo: ref,
		Account: &AccountRequest{
			AccountNumber: r.Target.AccountNumber,
			AccountType:   string(r.Target.Type),
			RoutingNumber: r.Target.RoutingNumber,
			BankName:      r.Target.BankName,
			DepositType:   string(r.Allocation.Kind),
			DepositValue:  r.Allocation.depositValue(),
		},
	})
	if err != nil {
		// The user exists now; hand its id back so a retry reuses it.
		return Switch{UserID: userID}, err
	}
	return Switch{UserID: userID, BridgeToken: tok.BridgeToken}, nil
}

// User is the part of Truv's user object the service reads.
type User struct {
	ID             string `json:"id"`
	ExternalUserID string `json:"external_user_id"`
}

// CreateUser creates a Truv user for a donor (POST /v1/users/, "Create a
// user", docs.truv.com/api-reference/users/users_create). Only
// external_user_id is sent: Truv lists first_name and last_name as needed
// for document processing, which the service does not use.
func (c *Client) CreateUser(ctx context.Context, externalUserID string) (User, error) {
	var u User
	err := c.post(ctx, "create user", "/v1/users/", userRequest{ExternalUserID: externalUserID}, &u)
	if err != nil {
		return User{}, err
	}
	if u.ID == "" {
		return User{}, &UnavailableError{Op: "create user", Err: errors.New("answer has no user id")}
	}
	return u, nil
}

type userRequest struct {
	ExternalUserID string `json:"external_user_id"`
}

// BridgeTokenRequest is the body of POST /v1/users/{user_id}/tokens/, with
// the fields the deposit switch uses (Create a bridge token,
// docs.truv.com/reference/users_tokens; field names as Truv's own Go
// quickstart sends them, github.com/truvhq/quickstart golang/truv.go).
type BridgeTokenRequest struct {
	ProductType  string          `json:"product_type"`
	ClientName   string          `json:"client_name,omitempty"`
	TrackingInfo string          `json:"tracking_info,omitempty"`
	Account      *AccountRequest `json:"account,omitempty"`
}

// AccountRequest is the bridge token's account block: the target account
// and the allocation. Truv's quickstarts send deposit_value as a string.
type AccountRequest struct {
	AccountNumber string `json:"account_number"`
	AccountType   string `json:"account_type"`
	RoutingNumber string `json:"routing_number"`
	BankName      string `json:"bank_name"`
	DepositType   string `json:"deposit_type,omitempty"`
	DepositValue  string `json:"deposit_value,omitempty"`
}

// BridgeToken is the part of Truv's bridge token object the service reads.
type BridgeToken struct {
	BridgeToken  string `json:"bridge_token"`
	TrackingInfo string `json:"tracking_info"`
	ProductType  string `json:"product_type"`
}

// CreateBridgeToken creates a bridge token for a Truv user.
func (c *Client) CreateBridgeToken(ctx context.Context, userID string, r BridgeTokenRequest) (BridgeToken, error) {
	if !idForm.MatchString(userID) {
		return BridgeToken{}, fmt.Errorf("%w: user id must be 1 to 255 visible characters", ErrInvalidRequest)
	}
	var t BridgeToken
	path := "/v1/users/" + url.PathEscape(userID) + "/tokens/"
	if err := c.post(ctx, "create bridge token", path, r, &t); err != nil {
		return BridgeToken{}, err
	}
	if t.BridgeToken == "" {
		return BridgeToken{}, &UnavailableError{Op: "create bridge token", Err: errors.New("answer has no bridge_token")}
	}
	return t, nil
}

// post sends one JSON request with Truv's two authentication headers and
// decodes a 2xx answer into out; any other answer becomes a RefusedError or
// an UnavailableError.
func (c *Client) post(ctx context.Context, op, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("truv %s: encode request: %w", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("truv %s: build request: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Access-Client-Id", c.clientID)
	req.Header.Set("X-Access-Secret", c.secret)
	resp, err := c.http.Do(req)
	if err != nil {
		return &UnavailableError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
			return &UnavailableError{Op: op, Status: resp.StatusCode, Err: fmt.Errorf("decode answer: %w", err)}
		}
		return nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return &UnavailableError{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return refused(op, resp.StatusCode, raw)
}

// errorBody is Truv's documented error answer; Detail is the 404 shape.
type errorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Extra   struct {
			InvalidParams []InvalidParam `json:"invalid-params"`
		} `json:"extra"`
	} `json:"error"`
	Detail string `json:"detail"`
}

func refused(op string, status int, raw []byte) *RefusedError {
	e := &RefusedError{Op: op, Status: status}
	var b errorBody
	if json.Unmarshal(raw, &b) != nil {
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
		return e
	}
	if b.Error != nil {
		e.Code, e.Message, e.InvalidParams = b.Error.Code, b.Error.Message, b.Error.Extra.InvalidParams
	} else {
		e.Message = b.Detail
	}
	return e
}

// retryAfter reads a Retry-After header in seconds; zero when absent or in
// another form.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
