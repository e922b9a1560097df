package simulators

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
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
	// bank is the sandbox's Increase, which holds the transfers the bank's
	// webhooks name.
	bank *increasesandbox.Sandbox
}

// New returns a simulator posting to the edge under baseURL, with bank as
// the sandbox's Increase. roots, when set, are the certificates to trust
// for an https edge with a private certificate (the service's own).
func New(baseURL string, secrets Secrets, bank *increasesandbox.Sandbox, roots *x509.CertPool) *Simulator {
	return &Simulator{
		base:    strings.TrimRight(baseURL, "/"),
		secrets: secrets,
		bank:    bank,
		client:  EdgeClient(roots),
	}
}

// EdgeClient is the client that sends the sandbox's vendor webhooks to the
// service's own edge, as the vendors would: it trusts roots, when set, for
// an https edge with a private certificate, follows no redirect, and gives
// up after 15 s. Every webhook goes to the one edge, so it keeps a
// connection for each one sent at once, where the default keeps two and
// dials the rest afresh every time.
func EdgeClient(roots *x509.CertPool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = simulationConns
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// simulationConns is how many idle connections to the edge the simulator
// keeps: about as many simulations as a partner runs at once.
const simulationConns = 64

// Answer is the edge's answer to a simulated webhook.
type Answer struct {
	StatusCode int
	// Problem is the edge's application/problem+json body when it refused
	// the webhook (any answer but 2xx), so the caller learns why.
	Problem json.RawMessage
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
