// Package increasefake is a local stand-in for the parts of Increase's API
// the service touches, written from Increase's API reference and its
// official SDKs: it serves Inbound ACH Transfers and Events, opens Account
// Numbers under the Accounts a test adds (POST /account_numbers) and serves
// them and the Accounts, simulates an inbound ACH transfer the way
// POST /simulations/inbound_ach_transfers does in Increase's sandbox, and
// delivers the resulting webhooks signed as Increase signs them, retrying
// until the receiver answers 2xx.
//
// It checks what a client sends: every request must carry
// "Authorization: Bearer <the configured key>", paths must be documented
// ones, and a POST's Idempotency-Key is honoured as Increase documents
// (the same key and body replay the first answer; the same key with another
// body is a 409). Answers use Increase's error object (type, title, detail,
// status, reason), with the type names of Increase's SDKs.
//
// What is the fake's own choice, because Increase does not publish it: the
// titles and details of errors, the shape of generated ids and trace
// numbers, account numbers' digits, the webhook-id of a delivery (the Event
// id here), and the retry schedule (Options.Retries). The Idempotent-Replayed
// header and an object's idempotency_key are not set. State lives in memory,
// for one process.
package increasefake

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/partnergiving/giving/vendors/increase"
)

// DefaultRetries is the fake's wait before each new attempt at a webhook
// that did not get a 2xx: five attempts in about fifteen seconds, so a test
// sees retries without waiting for Increase's real schedule, which spans
// days.
var DefaultRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// Options configure a Fake.
type Options struct {
	// APIKey is the only key the fake accepts.
	APIKey string
	// WebhookURL is the event subscription's URL: where the fake POSTs an
	// Event. Empty: events are recorded and not sent.
	WebhookURL string
	// WebhookSecret is the event subscription's shared secret the fake signs
	// with. A test of a refused webhook gives it a wrong one.
	WebhookSecret []byte
	// Retries are the waits before each retry of a webhook; nil is
	// DefaultRetries, an empty non-nil slice means a single attempt.
	Retries []time.Duration
	// HTTPClient sends the webhooks; nil is a client with a 10s timeout.
	HTTPClient *http.Client
	// Now is the fake's clock; nil is time.Now.
	Now func() time.Time
}

// Request is one API request the fake received, for a test to check what
// the client sent.
type Request struct {
	Method         string
	Path           string
	Authorization  string
	IdempotencyKey string
	// Body is what the client sent, for a test to sweep it for what must
	// never reach the bank (a donor's phone).
	Body   []byte
	Status int
}

// Fake is an in-memory Increase. Its zero value is not usable; call New.
type Fake struct {
	opts Options

	mu             sync.Mutex
	accounts       map[string]string // account id → its bank
	accountNumbers map[string]increase.AccountNumber
	transfers      map[string]increase.InboundACHTransfer
	events         map[string]increase.Event
	idempotency    map[string]replay
	requests       []Request
	deliveries     []*Delivery

	// keyed serialises requests under an Idempotency-Key, so that two at
	// once create one object, as at Increase.
	keyed sync.Mutex

	wg sync.WaitGroup
}

// replay is the first answer to an idempotency key.
type replay struct {
	body   []byte
	status int
	answer []byte
}

// New returns a fake that accepts o.APIKey.
func New(o Options) *Fake {
	if o.Retries == nil {
		o.Retries = DefaultRetries
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Fake{
		opts:           o,
		accounts:       map[string]string{},
		accountNumbers: map[string]increase.AccountNumber{},
		transfers:      map[string]increase.InboundACHTransfer{},
		events:         map[string]increase.Event{},
		idempotency:    map[string]replay{},
	}
}

// Close waits for the webhooks being delivered to finish (delivered or out
// of retries).
func (f *Fake) Close() { f.wg.Wait() }

// AddAccount makes an Account known, held at bank (first_internet_bank,
// say): account numbers can be opened under it.
func (f *Fake) AddAccount(accountID, bank string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accounts[accountID] = bank
}

// AddAccountNumber makes an account number known, under an account: a
// simulated transfer can only be sent to a known account number, as at
// Increase.
func (f *Fake) AddAccountNumber(accountNumberID, accountID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accountNumbers[accountNumberID] = increase.AccountNumber{ID: accountNumberID, AccountID: accountID}
}

// AccountNumbers returns the account numbers opened or added so far.
func (f *Fake) AccountNumbers() []increase.AccountNumber {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]increase.AccountNumber, 0, len(f.accountNumbers))
	for _, n := range f.accountNumbers {
		out = append(out, n)
	}
	return out
}

// PutInboundACHTransfer stores a transfer the fake then serves, e.g. one
// increase.AcceptedTransfer builds for a simulated deposit.
func (f *Fake) PutInboundACHTransfer(t increase.InboundACHTransfer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfers[t.ID] = t
}

// Requests returns the API requests received so far, oldest first.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Routes, as the API reference names them.
var (
	inboundTransferPath = regexp.MustCompile(`^/inbound_ach_transfers/([^/]+)$`)
	eventPath           = regexp.MustCompile(`^/events/([^/]+)$`)
	accountNumberPath   = regexp.MustCompile(`^/account_numbers/([^/]+)$`)
	accountPath         = regexp.MustCompile(`^/accounts/([^/]+)$`)
)

const (
	simulatePath       = "/simulations/inbound_ach_transfers"
	accountNumbersPath = "/account_numbers"
)

// ServeHTTP answers Increase's API.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := Request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), IdempotencyKey: r.Header.Get("Idempotency-Key"), Body: body}
	status, answer := f.route(r)
	rec.Status = status
	f.mu.Lock()
	f.requests = append(f.requests, rec)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// route authenticates, then finds the documented operation.
func (f *Fake) route(r *http.Request) (int, []byte) {
	if status, answer, ok := f.authenticate(r); !ok {
		return status, answer
	}
	if m := inboundTransferPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
		f.mu.Lock()
		t, ok := f.transfers[m[1]]
		f.mu.Unlock()
		if !ok {
			return notFound(m[1])
		}
		return ok200(t)
	}
	if m := eventPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
		f.mu.Lock()
		e, ok := f.events[m[1]]
		f.mu.Unlock()
		if !ok {
			return notFound(m[1])
		}
		e.Type = "event"
		return ok200(e)
	}
	if r.URL.Path == simulatePath && r.Method == http.MethodPost {
		return f.idempotent(r, f.simulate)
	}
	if r.URL.Path == accountNumbersPath && r.Method == http.MethodPost {
		return f.idempotent(r, f.createAccountNumber)
	}
	if m := accountNumberPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
		f.mu.Lock()
		n, ok := f.accountNumbers[m[1]]
		f.mu.Unlock()
		if !ok {
			return notFound(m[1])
		}
		return ok200(n)
	}
	if m := accountPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
		f.mu.Lock()
		bank, ok := f.accounts[m[1]]
		f.mu.Unlock()
		if !ok {
			return notFound(m[1])
		}
		return ok200(increase.Account{ID: m[1], Bank: bank, Status: "open", Type: "account"})
	}
	return apiError(http.StatusNotFound, "api_method_not_found_error", "", "No API method exists at "+r.Method+" "+r.URL.Path+".", "")
}

// authenticate checks the bearer key the way Increase's SDKs send it.
func (f *Fake) authenticate(r *http.Request) (int, []byte, bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		status, body := apiError(http.StatusUnauthorized, "invalid_api_key_error", "no_header", "No Authorization header was sent.", "")
		return status, body, false
	}
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || key != f.opts.APIKey || key == "" {
		status, body := apiError(http.StatusUnauthorized, "invalid_api_key_error", "no_credential", "The API key is not valid.", "")
		return status, body, false
	}
	return 0, nil, true
}

// idempotent replays the first answer to a POST's Idempotency-Key.
func (f *Fake) idempotent(r *http.Request, op func(body []byte) (int, []byte)) (int, []byte) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return apiError(http.StatusBadRequest, "malformed_request_error", "", "The body could not be read.", "")
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return op(body)
	}
	f.keyed.Lock()
	defer f.keyed.Unlock()
	f.mu.Lock()
	prev, seen := f.idempotency[key]
	f.mu.Unlock()
	if seen {
		if !bytes.Equal(prev.body, body) {
			// Increase names the object the key created, in resource_id.
			var first struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(prev.answer, &first)
			status, answer := apiError(http.StatusConflict, "idempotency_key_already_used_error", "", "The Idempotency-Key was already used with another request.", "")
			return status, withResourceID(answer, first.ID)
		}
		return prev.status, prev.answer
	}
	status, answer := op(body)
	f.mu.Lock()
	f.idempotency[key] = replay{body: body, status: status, answer: answer}
	f.mu.Unlock()
	return status, answer
}

// simulateParams are the documented parameters of
// POST /simulations/inbound_ach_transfers that the fake honours.
type simulateParams struct {
	AccountNumberID          string  `json:"account_number_id"`
	Amount                   *int64  `json:"amount"`
	CompanyDescriptiveDate   *string `json:"company_descriptive_date"`
	CompanyDiscretionaryData *string `json:"company_discretionary_data"`
	CompanyEntryDescription  string  `json:"company_entry_description"`
	CompanyID                string  `json:"company_id"`
	CompanyName              string  `json:"company_name"`
	ReceiverIDNumber         *string `json:"receiver_id_number"`
	ReceiverName             *string `json:"receiver_name"`
	ResolveAt                *string `json:"resolve_at"`
	StandardEntryClassCode   string  `json:"standard_entry_class_code"`
}

// simulate creates an inbound ACH transfer to a known account number: a
// positive amount is a credit, a negative one a debit. Without resolve_at,
// Increase resolves the transfer at once, so it is created accepted; the
// created Event is then delivered to the webhook URL.
func (f *Fake) simulate(body []byte) (int, []byte) {
	var p simulateParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return apiError(http.StatusBadRequest, "malformed_request_error", "", "The body is not a JSON object of the documented parameters.", err.Error())
	}
	var missing []string
	if p.AccountNumberID == "" {
		missing = append(missing, "account_number_id")
	}
	if p.Amount == nil || *p.Amount == 0 {
		missing = append(missing, "amount")
	}
	if len(missing) > 0 {
		return apiError(http.StatusBadRequest, "invalid_parameters_error", "", "Some parameters are missing or invalid.", strings.Join(missing, ", "))
	}
	if p.ResolveAt != nil {
		// Not simulated: a pending transfer resolving later needs a clock the
		// tests would have to drive; no caller needs it yet.
		return apiError(http.StatusBadRequest, "invalid_parameters_error", "", "The fake does not simulate resolve_at.", "resolve_at")
	}
	f.mu.Lock()
	number, known := f.accountNumbers[p.AccountNumberID]
	f.mu.Unlock()
	if !known {
		return notFound(p.AccountNumberID)
	}
	now := f.opts.Now().UTC().Truncate(time.Second)
	amount, direction := *p.Amount, increase.DirectionCredit
	if amount < 0 {
		amount, direction = -amount, increase.DirectionDebit
	}
	t := increase.AcceptedTransfer(increase.Credit{
		TransferID:          "inbound_ach_transfer_" + randomID(),
		Trace:               randomTrace(),
		AmountCents:         amount,
		AccountID:           number.AccountID,
		AccountNumberID:     p.AccountNumberID,
		OriginatorName:      p.CompanyName,
		OriginatorCompanyID: p.CompanyID,
		EntryDescription:    p.CompanyEntryDescription,
		ReceivedAt:          now,
	})
	// What the simulation's parameters say beyond a credit's terms.
	t.Direction = direction
	t.StandardEntryClassCode = cmp.Or(p.StandardEntryClassCode, "corporate_credit_or_debit")
	t.OriginatorCompanyDescriptiveDate = p.CompanyDescriptiveDate
	t.OriginatorCompanyDiscretionaryData = p.CompanyDiscretionaryData
	t.ReceiverIDNumber, t.ReceiverName = p.ReceiverIDNumber, p.ReceiverName
	f.PutInboundACHTransfer(t)
	f.Emit(increase.TransferCreated("event_"+randomID(), t.ID, now))
	return ok200(t)
}

// Credit makes c arrive as Increase would announce it: the accepted transfer
// increase.AcceptedTransfer describes is stored, and the
// inbound_ach_transfer.created Event naming it is emitted. A test picks the
// trace, amount and account number this way, where the simulation endpoint
// makes its own trace.
//
// What the service could not read back is refused, as the production
// readers decide: an increase.ErrInvalidCredit when Normalise refuses the
// transfer (or c names a currency other than USD, which the transfer cannot
// carry), an increase.ErrMalformedEvent when ParseEvent refuses the Event.
func (f *Fake) Credit(c increase.Credit) error {
	if c.Currency != "" && c.Currency != increase.USD {
		return fmt.Errorf("%w: %q", increase.ErrCurrency, c.Currency)
	}
	t := increase.AcceptedTransfer(c)
	if _, err := increase.Normalise(c.EventID, t); err != nil {
		return err
	}
	body, err := increase.MarshalEvent(increase.TransferCreated(c.EventID, t.ID, t.CreatedAt))
	if err != nil {
		return err
	}
	e, err := increase.ParseEvent(body)
	if err != nil {
		return err
	}
	f.PutInboundACHTransfer(t)
	f.Emit(e)
	return nil
}

// Emit records an Event, served at GET /events/{id}, and delivers it to the
// webhook URL in the background, as Increase does.
func (f *Fake) Emit(e increase.Event) {
	e.Type = "event"
	f.mu.Lock()
	f.events[e.ID] = e
	f.mu.Unlock()
	if f.opts.WebhookURL == "" {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.Deliver(context.Background(), e)
	}()
}

func ok200(v any) (int, []byte) {
	b, err := json.Marshal(v)
	if err != nil {
		return apiError(http.StatusInternalServerError, "internal_server_error", "", "The fake could not encode its answer.", err.Error())
	}
	return http.StatusOK, b
}

func notFound(id string) (int, []byte) {
	status, body := apiError(http.StatusNotFound, "object_not_found_error", "", "Could not find the object.", "No object with id "+id+" exists.")
	return status, withResourceID(body, id)
}

// withResourceID sets the error object's resource_id.
func withResourceID(body []byte, id string) []byte {
	var e map[string]any
	_ = json.Unmarshal(body, &e)
	e["resource_id"] = id
	b, _ := json.Marshal(e)
	return b
}

// apiError is Increase's error object.
func apiError(status int, typ, reason, title, detail string) (int, []byte) {
	e := map[string]any{
		"status": status, "type": typ, "title": title, "detail": nullable(detail),
		"errors": []any{}, "reason": nullable(reason), "resource_id": nil, "retry_after": nil,
	}
	b, _ := json.Marshal(e)
	return status, b
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// randomID is an id suffix of the documented alphabet and length.
func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}

// randomDigits is n random decimal digits.
func randomDigits(n int) string {
	b := make([]byte, n)
	for i := range b {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		b[i] = byte('0' + d.Int64())
	}
	return string(b)
}

// randomTrace is a 15-digit trace number: the originating bank's 8-digit
// routing prefix of the documented example, then a 7-digit sequence.
func randomTrace() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(10_000_000))
	return fmt.Sprintf("02100003%07d", n.Int64())
}
