package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// ---- Webhooks: endpoints, a receiver, the spec's signature check ----

// endpoint is a created webhook endpoint as the test sees it.
type endpoint struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

func createEndpoint(t *testing.T, c *apitest.Client, url string, types ...string) endpoint {
	t.Helper()
	if len(types) == 0 {
		types = []string{"*"}
	}
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": url, "event_types": types}, nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create endpoint %s: %d %s", url, resp.Status, resp.Body)
	}
	var ep endpoint
	resp.JSON(t, &ep)
	return ep
}

// attemptView is a delivery attempt as the API lists it.
type attemptView struct {
	ID            string  `json:"id"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	StatusCode    *int    `json:"status_code"`
	DurationMS    int64   `json:"duration_ms"`
	AttemptedAt   string  `json:"attempted_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	Exhausted     bool    `json:"exhausted"`
	Error         *string `json:"error"`
}

func attempts(t *testing.T, c *apitest.Client, endpointID string) []attemptView {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+endpointID+"/deliveries", nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("deliveries of %s: %d %s", endpointID, resp.Status, resp.Body)
	}
	var page struct {
		Data []attemptView `json:"data"`
	}
	resp.JSON(t, &page)
	return page.Data
}

// delivery is one request a receiver got.
type delivery struct {
	Body        []byte
	Signature   string
	ContentType string
	UserAgent   string
	At          time.Time
	EventID     string
	EventType   string
	// Status is what the receiver answered; 0 while it hangs.
	Status int
	// Header is every header of the request.
	Header http.Header
}

// receiver is a real HTTP server on loopback that records every request and
// answers as respond says: a status, or 0 to hang until the sender gives up.
// Every event it receives is checked against its type's published payload
// schema (GET /v1/event_types); a mismatch fails the test when it ends.
type receiver struct {
	srv     *httptest.Server
	URL     string
	mu      sync.Mutex
	got     []delivery
	invalid []error
	respond func(n int, r *http.Request, w http.ResponseWriter) int
	release chan struct{}
}

func newReceiver(t *testing.T, respond func(n int, r *http.Request, w http.ResponseWriter) int) *receiver {
	t.Helper()
	return newReceiverOn(t, nil, respond)
}

// newReceiverOn serves on ln, or on a fresh loopback port when ln is nil.
func newReceiverOn(t *testing.T, ln net.Listener, respond func(n int, r *http.Request, w http.ResponseWriter) int) *receiver {
	t.Helper()
	rc := &receiver{respond: respond, release: make(chan struct{})}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	if ln != nil {
		rc.srv.Listener.Close()
		rc.srv.Listener = ln
	}
	rc.srv.Start()
	rc.URL = rc.srv.URL + "/hooks"
	t.Cleanup(rc.close)
	t.Cleanup(func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, err := range rc.invalid {
			t.Errorf("webhook receiver: %v", err)
		}
	})
	return rc
}

// failingReceiver answers 500 to its first n deliveries, then 200.
func failingReceiver(t *testing.T, n int) *receiver {
	return newReceiver(t, func(got int, _ *http.Request, _ http.ResponseWriter) int {
		if got <= n {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
}

// okReceiver answers 200 to everything.
func okReceiver(t *testing.T) *receiver {
	return newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusOK })
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{Body: body, Signature: r.Header.Get("Service-Signature"), ContentType: r.Header.Get("Content-Type"), UserAgent: r.Header.Get("User-Agent"), At: time.Now(), Header: r.Header.Clone()}
	var env struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(body, &env)
	d.EventID, d.EventType = env.EventID, env.EventType
	var invalid error
	if env.EventType != domain.WebhookTestEventType {
		invalid = apitest.ValidateEvent(body)
	}
	rc.mu.Lock()
	if invalid != nil {
		rc.invalid = append(rc.invalid, invalid)
	}
	rc.got = append(rc.got, d)
	n := len(rc.got)
	rc.mu.Unlock()
	status := rc.respond(n, r, w)
	rc.mu.Lock()
	rc.got[n-1].Status = status
	rc.mu.Unlock()
	if status == 0 {
		select {
		case <-r.Context().Done():
		case <-rc.release:
		}
		return
	}
	w.WriteHeader(status)
}

func (rc *receiver) close() {
	select {
	case <-rc.release:
	default:
		close(rc.release)
	}
	rc.srv.Close()
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// accepted reports which event ids were answered 2xx.
func (rc *receiver) accepted() map[string]bool {
	out := map[string]bool{}
	for _, d := range rc.deliveries() {
		if d.Status/100 == 2 {
			out[d.EventID] = true
		}
	}
	return out
}

// received reports how many times each event id arrived.
func (rc *receiver) received() map[string]int {
	out := map[string]int{}
	for _, d := range rc.deliveries() {
		out[d.EventID]++
	}
	return out
}

// verifyAll checks every delivery the receiver got against secret, with
// both signature schemes, and the headers every delivery carries.
func (rc *receiver) verifyAll(t *testing.T, secret string) {
	t.Helper()
	for i, d := range rc.deliveries() {
		if err := verifySignature(secret, d.Signature, d.Body, d.At); err != nil {
			t.Errorf("delivery %d (%s): %v", i, d.EventID, err)
		}
		if err := verifyStandard(secret, d.Header, d.Body); err != nil {
			t.Errorf("delivery %d (%s): Standard Webhooks: %v", i, d.EventID, err)
		}
		if d.Header.Get("webhook-id") != d.EventID {
			t.Errorf("delivery %d: webhook-id %q, want the event_id %q", i, d.Header.Get("webhook-id"), d.EventID)
		}
		if n, err := strconv.Atoi(d.Header.Get("Service-Webhook-Attempt")); err != nil || n < 1 {
			t.Errorf("delivery %d: Service-Webhook-Attempt %q", i, d.Header.Get("Service-Webhook-Attempt"))
		}
		if d.ContentType != "application/json" {
			t.Errorf("delivery %d: Content-Type %q", i, d.ContentType)
		}
		if d.UserAgent != domain.WebhookUserAgent {
			t.Errorf("delivery %d: User-Agent %q", i, d.UserAgent)
		}
	}
	verifyStandardJS(t, secret, rc.deliveries())
}

// standardWebhooksJS is the pinned official JavaScript library of Standard
// Webhooks and its verifying script.
const standardWebhooksJS = "../tools/standardwebhooks"

// verifyStandardJS verifies deliveries with the official JavaScript library
// too (tools/standardwebhooks/verify.js under node). Without it installed
// the check is left out, unless GIVING_REQUIRE_BROWSER=1 (CI).
func verifyStandardJS(t *testing.T, secret string, ds []delivery) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(standardWebhooksJS, "node_modules", "standardwebhooks"))
	}
	if err != nil {
		if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GIVING_REQUIRE_BROWSER=1 but node or standardwebhooks is missing (cd tools/standardwebhooks && npm ci): %v", err)
		}
		return
	}
	type item struct {
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	items := make([]item, len(ds))
	for i, d := range ds {
		items[i] = item{Secret: secret, Body: string(d.Body), Headers: map[string]string{
			"webhook-id": d.Header.Get("webhook-id"), "webhook-timestamp": d.Header.Get("webhook-timestamp"),
			"webhook-signature": d.Header.Get("webhook-signature"),
		}}
	}
	data, _ := json.Marshal(items)
	file := filepath.Join(t.TempDir(), "deliveries.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, filepath.Join(standardWebhooksJS, "verify.js"), file).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("verified %d", len(ds)) {
		t.Errorf("the Standard Webhooks JavaScript library refused a delivery: %v: %s", err, out)
	}
}

// signaturePattern is the spec's header format.
var signaturePattern = regexp.MustCompile(`^t=([0-9]+),v1=([0-9a-f]{64})$`)

// verifySignature is a receiver's check, written from the spec's four rules
// and independent of the service's signer: the header's pattern, a
// timestamp within 300 seconds of now, HMAC-SHA256 over "<t>.<raw body>"
// keyed with the secret, compared in constant time.
func verifySignature(secret, header string, body []byte, now time.Time) error {
	m := signaturePattern.FindStringSubmatch(header)
	if m == nil {
		return fmt.Errorf("header %q does not match t=<digits>,v1=<64 lowercase hex>", header)
	}
	ts, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %w", m[1], err)
	}
	if diff := now.Unix() - ts; diff > 300 || diff < -300 {
		return fmt.Errorf("timestamp %d is %ds from now", ts, diff)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(m[1] + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	got, _ := hex.DecodeString(m[2])
	if !hmac.Equal(got, want) {
		return errors.New("signature does not match")
	}
	return nil
}

// verifyStandard checks the Standard Webhooks headers with the official Go
// library of standardwebhooks.com, which knows nothing of the service's
// signer: webhook-id, webhook-timestamp within five minutes, and a
// webhook-signature keyed with the base64 decoding of the whsec_ secret.
func verifyStandard(secret string, h http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(body, h)
}

// hosts is a fixed resolver, standing in for DNS so that tests can name
// hosts that resolve where they need. Its table can be changed while the
// stack runs, to play a DNS rebinding.
type hosts struct {
	mu    sync.Mutex
	table map[string][]netip.Addr
}

func newHosts(entries map[string]string) *hosts {
	h := &hosts{table: map[string][]netip.Addr{}}
	for name, addrs := range entries {
		h.set(name, addrs)
	}
	return h
}

func (h *hosts) set(name string, addrs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	h.table[name] = out
}

func (h *hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if addrs, ok := h.table[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
