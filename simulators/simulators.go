package simulators

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
)

// Secrets are the sandbox vendors' signing secrets.
type Secrets struct {
	// Payroll is the sandbox's Truv access secret, which signs Truv's
	// webhooks.
	Payroll []byte
	Bank    []byte
	KYC     []byte
}

// Simulator sends vendor webhooks to one edge.
type Simulator struct {
	base    string
	secrets Secrets
	client  *http.Client
}

// New returns a simulator posting to the edge under baseURL. roots, when
// set, are the certificates to trust for an https edge with a private
// certificate (the service's own).
func New(baseURL string, secrets Secrets, roots *x509.CertPool) *Simulator {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &Simulator{
		base:    strings.TrimRight(baseURL, "/"),
		secrets: secrets,
		client:  &http.Client{Transport: tr, Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// webhook is the vendor webhook envelope.
type webhook struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

// Answer is the edge's answer to a simulated webhook.
type Answer struct {
	StatusCode int
	// Problem is the edge's application/problem+json body when it refused
	// the webhook (any answer but 2xx), so the caller learns why.
	Problem json.RawMessage
}

// send signs and posts one webhook in the service's generic envelope and
// returns the edge's answer. id is the vendor's event id; empty makes a new
// one.
func (s *Simulator) send(ctx context.Context, kind, typ, id string, secret []byte, data any) (Answer, error) {
	now := time.Now()
	if id == "" {
		id = "sim_" + ksuid.New().String()
	}
	body, err := json.Marshal(webhook{ID: id, Type: typ, CreatedAt: domain.FormatTime(now), Data: data})
	if err != nil {
		return Answer{}, fmt.Errorf("simulate %s: %w", kind, err)
	}
	h := http.Header{}
	h.Set(domain.VendorSignatureHeader, domain.Sign(secret, now, body))
	return s.post(ctx, kind, body, h)
}

// post sends one vendor webhook, body with its vendor's signature headers,
// to the edge's route for kind (payroll, bank, kyc) and returns the edge's
// answer. An error means the edge could not be reached.
func (s *Simulator) post(ctx context.Context, kind string, body []byte, header http.Header) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/edge/"+kind, bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("simulate %s: %w", kind, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "giving-sandbox-"+kind+"-simulator/1.0")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("simulate %s: reach edge: %w", kind, err)
	}
	defer resp.Body.Close()
	answer := Answer{StatusCode: resp.StatusCode}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err == nil && resp.StatusCode/100 != 2 && isProblem(resp.Header.Get("Content-Type"), raw) {
		answer.Problem = raw
	}
	return answer, nil
}

// isProblem reports whether body is a problem+json object.
func isProblem(contentType string, body []byte) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/problem+json" {
		return false
	}
	var p map[string]json.RawMessage
	return json.Unmarshal(body, &p) == nil && p["type"] != nil
}

// Deposit is a simulated bank credit.
type Deposit struct {
	ChurchID   string
	AccountRef string
	// Amount is passed to the bank webhook as given, so the edge's own
	// checks decide whether it is acceptable.
	Amount json.RawMessage
	// Trace is the bank's trace id; empty makes a new one (the caller
	// derives it from Request, see DerivedTrace, when there is one).
	Trace string
	// Request, when set, names the partner request the simulation runs for
	// (the same on every retry of it): the trace (unless given) and the
	// bank's event id derive from it, so a retried simulation sends the
	// very same bank webhook, and the edge credits it once.
	Request string
	// BankTS is the bank's timestamp (RFC 3339); empty means now.
	BankTS string
}

// DepositResult is what the bank sent, and the edge's answer.
type DepositResult struct {
	Answer
	Trace  string
	BankTS string
}

// Deposit sends the bank's ACH credit notification.
func (s *Simulator) Deposit(ctx context.Context, d Deposit) (DepositResult, error) {
	var id string
	if d.Request != "" {
		id = "sim_" + derived("bank-event", d.Request)
	}
	if d.Trace == "" {
		d.Trace = "trc_" + ksuid.New().String()
	}
	if d.BankTS == "" {
		d.BankTS = domain.FormatTime(time.Now())
	}
	answer, err := s.send(ctx, "bank", "ach.credit.received", id, s.secrets.Bank, map[string]any{
		"trace": d.Trace, "account_ref": d.AccountRef, "amount": d.Amount, "currency": "USD", "bank_ts": d.BankTS, "church_id": d.ChurchID,
	})
	return DepositResult{Answer: answer, Trace: d.Trace, BankTS: d.BankTS}, err
}

// DerivedTrace is the trace a simulated deposit for request gets when none
// is given.
func DerivedTrace(request string) string { return "trc_" + derived("trace", request) }

// derived is a ksuid-shaped name of what (a trace, an event id) for
// request: the same request always gets the same one.
func derived(what, request string) string {
	sum := sha256.Sum256([]byte("simulated " + what + "\x00" + request))
	id, _ := ksuid.FromBytes(sum[:20])
	return id.String()
}
