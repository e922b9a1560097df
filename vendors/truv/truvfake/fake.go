package truvfake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
)

// bridgeTokenLifetime is how long a bridge token opens Bridge: "the
// upstream bridge_token has expired (valid for 6 hours from creation)"
// (Errors & Rate Limits, docs.truv.com/api-reference/errors).
const bridgeTokenLifetime = 6 * time.Hour

// maxRecorded bounds what the fake remembers, so a long-running sandbox
// that serves the stand-in does not grow without end.
const maxRecorded = 1000

// maxBody bounds a request body the fake reads.
const maxBody = 1 << 20

// Config is the fake's account: the credentials it accepts and where it
// sends webhooks.
type Config struct {
	ClientID string
	// Secret is the access secret the fake accepts on API calls and signs
	// its webhooks with, as Truv does with the environment's secret.
	Secret string
	// WebhookURL is the service's edge route for Truv; SetWebhookURL
	// changes it later. Empty: webhooks are recorded but not sent.
	WebhookURL string
	// PublicURL is where a browser reaches the fake when it is served under
	// a path (the sandbox mounting it behind http.StripPrefix); the Bridge
	// script opens the widget there. Empty: the origin the script was
	// fetched from.
	PublicURL string
	// HoldDone stops a switch at switch_deposit when the donor finishes in
	// the widget: the payroll provider's confirmation (the task's done)
	// is then sent later, with Send, as the sandbox's payroll-connected
	// simulator does. False sends done right after, as a provider that
	// confirms at once would.
	HoldDone bool
	// Forget keeps no record of users, tokens, requests or deliveries (the
	// sandbox's stand-in, which runs as long as the service: its ids and
	// tokens seal themselves, so nothing needs them kept). Users, Tokens,
	// Requests and Deliveries then say nothing.
	Forget bool
	// HTTPClient delivers webhooks; one with a 10 s timeout when nil.
	HTTPClient *http.Client
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
}

// Request is one API request the fake received, as it arrived, and the
// status it answered (0 when the client gave up first).
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Status int
}

// User is a Truv user the fake holds.
type User struct {
	ID             string
	ExternalUserID string
	CreatedAt      time.Time
}

// Token is a bridge token the fake issued, with what it was issued for.
type Token struct {
	Token        string
	UserID       string
	ProductType  string
	ClientName   string
	TrackingInfo string
	Account      truv.AccountRequest
	CreatedAt    time.Time
}

// Fake is a local Truv: the two API calls the service makes, the Bridge
// widget's stand-in, and webhook delivery. It is an http.Handler, so a test
// serves it with NewServer and the sandbox can mount it where it likes.
type Fake struct {
	cfg  Config
	http *http.Client

	mu         sync.Mutex
	webhookURL string
	users      map[string]User
	tokens     map[string]Token
	requests   []Request
	deliveries []Delivery
	failures   []failure
	delay      time.Duration
}

type failure struct {
	status     int
	retryAfter int
	pathSuffix string // fail only a request whose path ends so; any when empty
}

// New returns a Fake with no users and no tokens.
func New(cfg Config) *Fake {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Fake{
		cfg:        cfg,
		http:       cfg.HTTPClient,
		webhookURL: cfg.WebhookURL,
		users:      make(map[string]User),
		tokens:     make(map[string]Token),
	}
}

// SetWebhookURL points the fake's webhooks at the service's edge.
func (f *Fake) SetWebhookURL(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.webhookURL = u
}

// FailNext makes the next n API calls answer status instead of doing their
// work: a 5xx with Truv's error object, or a 429 with Retry-After: 1.
func (f *Fake) FailNext(n, status int) { f.FailNextOn("", n, status) }

// FailNextOn is FailNext for calls whose path ends with suffix only
// ("/tokens/" fails bridge tokens and lets users through).
func (f *Fake) FailNextOn(suffix string, n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.failures = append(f.failures, failure{status: status, retryAfter: 1, pathSuffix: suffix})
	}
}

// SetDelay holds every API answer for d, to exercise the client's timeout.
func (f *Fake) SetDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// Requests returns the API requests received so far, oldest first.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Tokens returns the bridge tokens issued so far.
func (f *Fake) Tokens() []Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Token, 0, len(f.tokens))
	for _, t := range f.tokens {
		out = append(out, t)
	}
	return out
}

// Users returns the users created so far.
func (f *Fake) Users() []User {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]User, 0, len(f.users))
	for _, u := range f.users {
		out = append(out, u)
	}
	return out
}

// ServeHTTP routes the API and the Bridge stand-in.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/bridge.js":
		f.serveScript(w, r)
	case strings.HasPrefix(r.URL.Path, "/bridge/"):
		f.serveBridge(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		f.serveAPI(w, r)
	default:
		writeNotFound(w)
	}
}

// serveAPI records the request, applies injected failures and delays,
// checks Truv's authentication and content type, and routes.
func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		f.record(Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Status: rec.status})
	}()
	if d := f.currentDelay(); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			rec.status = 0 // the client gave up before an answer
			return
		}
	}
	if fl, ok := f.nextFailure(r.URL.Path); ok {
		if fl.status == http.StatusTooManyRequests {
			rec.Header().Set("Retry-After", strconv.Itoa(fl.retryAfter))
		}
		writeError(rec, fl.status, "fake_injected_failure", "failure injected by the test", nil)
		return
	}
	if !f.authenticated(r) {
		// Truv's errors page documents 403 Forbidden for refused
		// credentials; its error.code for that case was not readable, so
		// the fake's code is its own.
		writeError(rec, http.StatusForbidden, "fake_forbidden", "Invalid client id or access secret", nil)
		return
	}
	if r.Method != http.MethodPost {
		writeError(rec, http.StatusMethodNotAllowed, "fake_method_not_allowed", "Only POST is served by the fake", nil)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(rec, http.StatusUnsupportedMediaType, "fake_unsupported_media_type", "Content-Type must be application/json", nil)
		return
	}
	switch parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); {
	case len(parts) == 2 && parts[1] == "users":
		f.createUser(rec, body)
	case len(parts) == 4 && parts[1] == "users" && parts[3] == "tokens":
		f.createBridgeToken(rec, parts[2], body)
	default:
		writeNotFound(rec)
	}
}

// authenticated checks the two headers Truv requires on every call.
func (f *Fake) authenticated(r *http.Request) bool {
	return r.Header.Get("X-Access-Client-Id") == f.cfg.ClientID &&
		r.Header.Get("X-Access-Secret") == f.cfg.Secret &&
		f.cfg.ClientID != "" && f.cfg.Secret != ""
}

// userBody is the body of Create a user. Truv takes more fields
// (first_name, last_name, email, phone, ssn); the fake accepts and records
// them like Truv would, and tests assert the client sends none.
type userBody struct {
	ExternalUserID *string `json:"external_user_id"`
	FirstName      *string `json:"first_name"`
	LastName       *string `json:"last_name"`
	Email          *string `json:"email"`
	Phone          *string `json:"phone"`
	SSN            *string `json:"ssn"`
}

// userAnswer is Truv's user object (The Users object,
// docs.truv.com/api-reference/users/object).
type userAnswer struct {
	ID             string  `json:"id"`
	ExternalUserID *string `json:"external_user_id"`
	FirstName      *string `json:"first_name"`
	LastName       *string `json:"last_name"`
	Email          *string `json:"email"`
	Phone          *string `json:"phone"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
}

func (f *Fake) createUser(w http.ResponseWriter, body []byte) {
	var b userBody
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, http.StatusBadRequest, "incorrect_parameters", "Incorrect request parameters",
			[]truv.InvalidParam{{Field: "body", Message: "not a JSON object"}})
		return
	}
	now := f.cfg.Now().UTC()
	u := User{ID: f.newUserID(), CreatedAt: now}
	if b.ExternalUserID != nil {
		u.ExternalUserID = *b.ExternalUserID
	}
	f.mu.Lock()
	if !f.cfg.Forget {
		f.users[u.ID] = u
	}
	f.mu.Unlock()
	ts := now.Format(time.RFC3339)
	writeJSON(w, http.StatusCreated, userAnswer{
		ID: u.ID, ExternalUserID: b.ExternalUserID, FirstName: b.FirstName, LastName: b.LastName,
		Email: b.Email, Phone: b.Phone, CreatedAt: ts, UpdatedAt: ts,
	})
}

// tokenBody is the body of Create a bridge token, as far as the fake
// checks it. deposit_value is raw because Truv's quickstarts send a string
// and its demo application a number.
type tokenBody struct {
	ProductType  string `json:"product_type"`
	ClientName   string `json:"client_name"`
	TrackingInfo string `json:"tracking_info"`
	Account      *struct {
		AccountNumber string          `json:"account_number"`
		AccountType   string          `json:"account_type"`
		RoutingNumber string          `json:"routing_number"`
		BankName      string          `json:"bank_name"`
		DepositType   string          `json:"deposit_type"`
		DepositValue  json.RawMessage `json:"deposit_value"`
	} `json:"account"`
}

// products are product_type's documented values (Create a bridge token).
var products = map[string]bool{
	"employment": true, "income": true, "deposit_switch": true, "pll": true,
	"insurance": true, "transactions": true, "assets": true,
}

// tokenAnswer is the part of The Bridge Token object the fake answers.
type tokenAnswer struct {
	BridgeToken  string `json:"bridge_token"`
	TrackingInfo string `json:"tracking_info"`
	ProductType  string `json:"product_type"`
}

func (f *Fake) createBridgeToken(w http.ResponseWriter, userID string, body []byte) {
	if !f.issuedUser(userID) {
		writeNotFound(w)
		return
	}
	var b tokenBody
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, http.StatusBadRequest, "incorrect_parameters", "Incorrect request parameters",
			[]truv.InvalidParam{{Field: "body", Message: "not a JSON object"}})
		return
	}
	acct, invalid := checkToken(b)
	if len(invalid) > 0 {
		writeError(w, http.StatusBadRequest, "incorrect_parameters", "Incorrect request parameters", invalid)
		return
	}
	t := Token{
		UserID: userID, ProductType: b.ProductType, ClientName: b.ClientName,
		TrackingInfo: b.TrackingInfo, Account: acct, CreatedAt: f.cfg.Now(),
	}
	t.Token = f.sealToken(t)
	f.mu.Lock()
	if !f.cfg.Forget {
		f.tokens[t.Token] = t
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, tokenAnswer{BridgeToken: t.Token, TrackingInfo: t.TrackingInfo, ProductType: t.ProductType})
}

// checkToken applies what Truv documents for a deposit switch token: the
// product is one Truv knows, and a deposit_switch or pll token carries
// account_number, account_type, routing_number, bank_name, deposit_type
// and deposit_value (Direct Deposit Switch, docs.truv.com/docs/user-experience-dds).
func checkToken(b tokenBody) (truv.AccountRequest, []truv.InvalidParam) {
	var bad []truv.InvalidParam
	add := func(field, msg string) { bad = append(bad, truv.InvalidParam{Field: field, Message: msg}) }
	if !products[b.ProductType] {
		add("product_type", fmt.Sprintf("%q is not a valid choice.", b.ProductType))
	}
	if b.ProductType != truv.ProductDepositSwitch && b.ProductType != "pll" {
		return truv.AccountRequest{}, bad
	}
	a := b.Account
	if a == nil {
		add("account", "This field is required.")
		return truv.AccountRequest{}, bad
	}
	out := truv.AccountRequest{
		AccountNumber: a.AccountNumber, AccountType: a.AccountType, RoutingNumber: a.RoutingNumber,
		BankName: a.BankName, DepositType: a.DepositType,
	}
	for field, v := range map[string]string{
		"account.account_number": a.AccountNumber, "account.routing_number": a.RoutingNumber,
		"account.bank_name": a.BankName,
	} {
		if strings.TrimSpace(v) == "" {
			add(field, "This field is required.")
		}
	}
	if a.AccountType != "checking" && a.AccountType != "savings" {
		add("account.account_type", fmt.Sprintf("%q is not a valid choice.", a.AccountType))
	}
	value, valueErr := depositValue(a.DepositValue)
	out.DepositValue = value
	switch a.DepositType {
	case "entire":
	case "percent", "amount":
		h, err := truv.ParseDepositValue(value)
		switch {
		case valueErr != nil || err != nil:
			add("account.deposit_value", "A valid number is required.")
		case h <= 0:
			add("account.deposit_value", "Ensure this value is greater than 0.")
		case a.DepositType == "percent" && h > 100_00:
			add("account.deposit_value", "Ensure this value is less than or equal to 100.")
		}
	default:
		add("account.deposit_type", fmt.Sprintf("%q is not a valid choice.", a.DepositType))
	}
	return out, bad
}

// depositValue reads deposit_value as a string or a number.
func depositValue(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", err
	}
	return n.String(), nil
}

func (f *Fake) record(r Request) {
	if f.cfg.Forget {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	if len(f.requests) > maxRecorded {
		f.requests = f.requests[len(f.requests)-maxRecorded:]
	}
}

// nextFailure takes the first injected failure that applies to path.
func (f *Fake) nextFailure(path string) (failure, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fl := range f.failures {
		if strings.HasSuffix(path, fl.pathSuffix) {
			f.failures = append(f.failures[:i], f.failures[i+1:]...)
			return fl, true
		}
	}
	return failure{}, false
}

func (f *Fake) currentDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

// recorder remembers the status written, for Requests.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with Truv's documented error object; extra appears
// only on a 400, as the errors page says.
func writeError(w http.ResponseWriter, status int, code, message string, invalid []truv.InvalidParam) {
	type extra struct {
		InvalidParams []truv.InvalidParam `json:"invalid-params"`
	}
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Extra   *extra `json:"extra,omitempty"`
	}
	b := body{Code: code, Message: message}
	if status == http.StatusBadRequest {
		if invalid == nil {
			invalid = []truv.InvalidParam{}
		}
		b.Extra = &extra{InvalidParams: invalid}
	}
	writeJSON(w, status, map[string]body{"error": b})
}

// writeNotFound answers Truv's 404 shape, {"detail": "Not Found."}.
func writeNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found."})
}
