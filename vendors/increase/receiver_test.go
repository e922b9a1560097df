package increase_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
)

// edge stands in for the service's vendor edge: it hands each webhook to a
// Receiver and answers as the package documentation advises, keeping what
// it received for the test to look at.
type edge struct {
	recv increase.Receiver

	mu      sync.Mutex
	credits []increase.Credit
	errs    []error
	ids     []string // webhook-id of every request
	fail    int      // answer 503 to this many requests first
}

func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.ids = append(e.ids, r.Header.Get("webhook-id"))
	if e.fail > 0 {
		e.fail--
		e.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	e.mu.Unlock()
	c, err := e.recv.Receive(r.Context(), r.Header, body)
	e.mu.Lock()
	if err == nil {
		e.credits = append(e.credits, c)
	} else {
		e.errs = append(e.errs, err)
	}
	e.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, increase.ErrIgnored):
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, increase.ErrInvalidSignature):
		w.WriteHeader(http.StatusUnauthorized)
	case errors.Is(err, increase.ErrMalformedEvent), errors.Is(err, increase.ErrInvalidCredit):
		w.WriteHeader(http.StatusUnprocessableEntity)
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func (e *edge) seen() ([]increase.Credit, []error, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]increase.Credit(nil), e.credits...), append([]error(nil), e.errs...), append([]string(nil), e.ids...)
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stack is a fake Increase sending webhooks to an edge whose receiver reads
// transfers back from the same fake, all over loopback HTTP.
type stack struct {
	fake *increasefake.Fake
	api  *httptest.Server
	edge *edge
}

func startStack(t *testing.T, edgeSecrets [][]byte, fakeSecret []byte) *stack {
	t.Helper()
	e := &edge{}
	edgeSrv := httptest.NewServer(e)
	t.Cleanup(edgeSrv.Close)
	f, api := startFake(t, increasefake.Options{
		WebhookURL:    edgeSrv.URL + "/vendors/bank",
		WebhookSecret: fakeSecret,
		Retries:       []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
	})
	f.AddAccountNumber("account_number_church0001", "account_in71c4amph0vgo2qllky")
	e.recv = increase.Receiver{Secrets: edgeSecrets, Transfers: newClient(t, api.URL, testKey)}
	return &stack{fake: f, api: api, edge: e}
}

// simulate calls the fake's simulation endpoint as Increase's SDK would.
func (s *stack) simulate(t *testing.T, key string, params map[string]any) (int, increase.InboundACHTransfer) {
	t.Helper()
	body, _ := json.Marshal(params)
	req, _ := http.NewRequest(http.MethodPost, s.api.URL+"/simulations/inbound_ach_transfers", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tr increase.InboundACHTransfer
	_ = json.NewDecoder(res.Body).Decode(&tr)
	return res.StatusCode, tr
}

func TestSimulatedTransferReachesEdgeAsCredit(t *testing.T) {
	secret := []byte("subscription-secret")
	s := startStack(t, [][]byte{secret}, secret)

	status, tr := s.simulate(t, "deposit-1", map[string]any{
		"account_number_id": "account_number_church0001", "amount": 2500075, "company_name": "ACME PAYROLL",
	})
	if status != http.StatusOK || tr.Status != "accepted" || tr.Direction != "credit" {
		t.Fatalf("simulate = %d %+v", status, tr)
	}
	waitFor(t, 5*time.Second, "the credit at the edge", func() bool { c, _, _ := s.edge.seen(); return len(c) == 1 })

	credits, errs, _ := s.edge.seen()
	c := credits[0]
	if c.TransferID != tr.ID || c.Trace != tr.TraceNumber || c.AmountCents != 2500075 || c.Currency != "USD" ||
		c.AccountNumberID != "account_number_church0001" || c.OriginatorName != "ACME PAYROLL" || len(errs) != 0 {
		t.Fatalf("credit = %+v, errors %v", c, errs)
	}
	s.fake.Close()
	if d := s.fake.Deliveries(); len(d) != 1 || !d[0].Delivered || len(d[0].Attempts) != 1 || d[0].EventID != c.EventID {
		t.Fatalf("deliveries = %+v", d)
	}
}

func TestSimulationIsIdempotent(t *testing.T) {
	secret := []byte("subscription-secret")
	s := startStack(t, [][]byte{secret}, secret)
	params := map[string]any{"account_number_id": "account_number_church0001", "amount": 100}

	_, first := s.simulate(t, "same-key", params)
	_, again := s.simulate(t, "same-key", params)
	if first.ID == "" || again.ID != first.ID {
		t.Fatalf("a replayed key made another transfer: %s, %s", first.ID, again.ID)
	}
	params["amount"] = 200
	if status, _ := s.simulate(t, "same-key", params); status != http.StatusConflict {
		t.Fatalf("same key, other body: status %d, want 409", status)
	}
	s.fake.Close()
	if n := len(s.fake.Deliveries()); n != 1 {
		t.Fatalf("%d webhooks for one transfer", n)
	}
}

func TestSimulationChecksParameters(t *testing.T) {
	secret := []byte("subscription-secret")
	s := startStack(t, [][]byte{secret}, secret)
	for name, tt := range map[string]struct {
		params map[string]any
		status int
	}{
		"unknown account number": {map[string]any{"account_number_id": "account_number_nobody", "amount": 100}, 404},
		"no amount":              {map[string]any{"account_number_id": "account_number_church0001"}, 400},
		"unknown parameter":      {map[string]any{"account_number_id": "account_number_church0001", "amount": 100, "trace_number": "1"}, 400},
		"fractional amount":      {map[string]any{"account_number_id": "account_number_church0001", "amount": 1.5}, 400},
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := s.simulate(t, name, tt.params); status != tt.status {
				t.Fatalf("status %d, want %d", status, tt.status)
			}
		})
	}
}

func TestWebhookWithWrongSecretIsRefusedAndRetried(t *testing.T) {
	s := startStack(t, [][]byte{[]byte("the-edge-secret")}, []byte("another-secret"))

	s.simulate(t, "deposit-1", map[string]any{"account_number_id": "account_number_church0001", "amount": 100})
	s.fake.Close()

	credits, errs, ids := s.edge.seen()
	if len(credits) != 0 || len(errs) != 3 {
		t.Fatalf("credits %v, errors %v", credits, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, increase.ErrSignatureInvalid) {
			t.Fatalf("err = %v, want ErrSignatureInvalid", err)
		}
	}
	d := s.fake.Deliveries()
	if len(d) != 1 || d[0].Delivered || len(d[0].Attempts) != 3 {
		t.Fatalf("deliveries = %+v", d)
	}
	for _, a := range d[0].Attempts {
		if a.Status != http.StatusUnauthorized {
			t.Fatalf("attempt = %+v, want 401", a)
		}
	}
	if ids[0] != d[0].EventID || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("webhook-id changed between retries: %v", ids)
	}
}

func TestWebhookRetriedUntilAccepted(t *testing.T) {
	secret := []byte("subscription-secret")
	s := startStack(t, [][]byte{secret}, secret)
	s.edge.fail = 2

	s.simulate(t, "deposit-1", map[string]any{"account_number_id": "account_number_church0001", "amount": 100})
	s.fake.Close()

	credits, _, _ := s.edge.seen()
	d := s.fake.Deliveries()
	if len(credits) != 1 || len(d) != 1 || !d[0].Delivered || len(d[0].Attempts) != 3 {
		t.Fatalf("credits %v, deliveries %+v", credits, d)
	}
	if d[0].Attempts[0].Status != 503 || d[0].Attempts[2].Status != 200 {
		t.Fatalf("attempts = %+v", d[0].Attempts)
	}
}

func TestReceiverAcceptsEitherSecretDuringRotation(t *testing.T) {
	old, next := []byte("old-secret"), []byte("new-secret")
	s := startStack(t, [][]byte{next, old}, old)
	s.simulate(t, "deposit-1", map[string]any{"account_number_id": "account_number_church0001", "amount": 100})
	waitFor(t, 5*time.Second, "the credit at the edge", func() bool { c, _, _ := s.edge.seen(); return len(c) == 1 })
}

func TestReceiverIgnoresWhatIsNoCredit(t *testing.T) {
	secret := []byte("subscription-secret")
	s := startStack(t, [][]byte{secret}, secret)

	// A debit from the simulation endpoint, and an event of another category.
	s.simulate(t, "debit-1", map[string]any{"account_number_id": "account_number_church0001", "amount": -100})
	s.fake.Emit(increase.Event{
		ID: "event_account0001", CreatedAt: time.Now(), Category: "account.created",
		AssociatedObjectType: "account", AssociatedObjectID: "account_in71c4amph0vgo2qllky",
	})
	s.fake.Close()

	credits, errs, _ := s.edge.seen()
	if len(credits) != 0 || len(errs) != 2 {
		t.Fatalf("credits %v, errors %v", credits, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, increase.ErrIgnored) {
			t.Fatalf("err = %v, want ErrIgnored", err)
		}
	}
	for _, d := range s.fake.Deliveries() {
		if !d.Delivered {
			t.Fatalf("an ignored event was not acknowledged: %+v", d)
		}
	}
}

// TestSandboxSimulatorPath is what POST /sandbox/simulate/deposit will do:
// build the transfer and its event from a Credit carrying the requested
// trace, put the transfer where the receiver fetches it, and POST the event
// signed with the sandbox's secret through the edge.
func TestSandboxSimulatorPath(t *testing.T) {
	secret := []byte("sandbox-secret")
	s := startStack(t, [][]byte{secret}, secret)
	edgeSrv := httptest.NewServer(s.edge)
	defer edgeSrv.Close()

	c := increase.Credit{
		EventID: "event_sim0001", TransferID: "inbound_ach_transfer_sim0001", Trace: "091000010000042",
		AmountCents: 1999, AccountID: "account_church0001", AccountNumberID: "account_number_church0001",
		ReceivedAt: time.Now().UTC().Truncate(time.Second),
	}
	s.fake.PutInboundACHTransfer(increase.AcceptedTransfer(c))
	body, err := increase.MarshalEvent(increase.TransferCreated(c.EventID, c.TransferID, c.ReceivedAt))
	if err != nil {
		t.Fatal(err)
	}
	status, err := increasefake.Post(context.Background(), http.DefaultClient, edgeSrv.URL, secret, c.EventID, body, time.Now())
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST = %d, %v", status, err)
	}
	credits, _, _ := s.edge.seen()
	if len(credits) != 1 || credits[0].Trace != "091000010000042" || credits[0].AmountCents != 1999 || credits[0].EventID != "event_sim0001" {
		t.Fatalf("credits = %+v", credits)
	}

	// The same webhook an hour later is refused: a replay, not a deposit.
	status, err = increasefake.Post(context.Background(), http.DefaultClient, edgeSrv.URL, secret, c.EventID, body, time.Now().Add(-time.Hour))
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("replayed POST = %d, %v; want 401", status, err)
	}
}

func TestReceiverReportsUnavailableFetch(t *testing.T) {
	secret := []byte("subscription-secret")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer down.Close()
	r := increase.Receiver{Secrets: [][]byte{secret}, Transfers: newClient(t, down.URL, testKey)}
	body := []byte(fixtureBody)
	_, err := r.Receive(context.Background(), increase.Sign(secret, "event_1", body, time.Now()), body)
	if !errors.Is(err, increase.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestFakeChecksAuthenticationAndPaths(t *testing.T) {
	_, srv := startFake(t, increasefake.Options{})
	tests := []struct {
		name, method, path, auth string
		status                   int
		typ                      string
	}{
		{"no header", "GET", "/inbound_ach_transfers/inbound_ach_transfer_tdrwqr3fq9gnnq49odev", "", 401, "invalid_api_key_error"},
		{"basic auth", "GET", "/inbound_ach_transfers/inbound_ach_transfer_tdrwqr3fq9gnnq49odev", "Basic " + testKey, 401, "invalid_api_key_error"},
		{"undocumented path", "GET", "/v1/inbound_ach_transfers/inbound_ach_transfer_tdrwqr3fq9gnnq49odev", "Bearer " + testKey, 404, "api_method_not_found_error"},
		{"wrong method", "DELETE", "/inbound_ach_transfers/inbound_ach_transfer_tdrwqr3fq9gnnq49odev", "Bearer " + testKey, 404, "api_method_not_found_error"},
		{"unknown event", "GET", "/events/event_unknown", "Bearer " + testKey, 404, "object_not_found_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var e increase.APIError
			if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tt.status || e.Type != tt.typ || e.Title == "" {
				t.Fatalf("%d %+v, want %d %s", res.StatusCode, e, tt.status, tt.typ)
			}
		})
	}
}

// TestDocumentedExampleReplayed replays what Increase documents, not what
// this package builds: the example Event, signed with the subscription's
// secret, pointing at the example transfer the fake serves.
func TestDocumentedExampleReplayed(t *testing.T) {
	secret := []byte("subscription-secret")
	f := increasefake.New(increasefake.Options{APIKey: testKey})
	var tr increase.InboundACHTransfer
	if err := json.Unmarshal(increasefake.ExampleInboundACHTransfer(), &tr); err != nil {
		t.Fatal(err)
	}
	f.PutInboundACHTransfer(tr)
	api := httptest.NewServer(f)
	defer api.Close()
	r := increase.Receiver{Secrets: [][]byte{secret}, Transfers: newClient(t, api.URL, testKey)}
	body := increasefake.ExampleEvent()

	c, err := r.Receive(context.Background(), increase.Sign(secret, "event_001dzz0r20rzr4zrhrr1364hy80", body, time.Now()), body)
	if err != nil || c.Trace != "021000038461022" || c.AmountCents != 100 || c.AccountNumberID != "account_number_v18nkfqm6afpsrvy82b2" {
		t.Fatalf("right secret: %+v, %v", c, err)
	}
	_, err = r.Receive(context.Background(), increase.Sign([]byte("wrong"), "event_001dzz0r20rzr4zrhrr1364hy80", body, time.Now()), body)
	if !errors.Is(err, increase.ErrInvalidSignature) {
		t.Fatalf("wrong secret: %v, want ErrInvalidSignature", err)
	}
	if n := len(f.Requests()); n != 1 {
		t.Fatalf("%d fetches; a refused webhook must not reach Increase", n)
	}
}

func TestReceiverWithoutTransferSource(t *testing.T) {
	secret := []byte("s")
	body := []byte(fixtureBody)
	_, err := increase.Receiver{Secrets: [][]byte{secret}}.Receive(context.Background(), increase.Sign(secret, "event_1", body, time.Now()), body)
	if !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
}
