package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/accountnumbers"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

// ---- The bank, Increase: its webhooks to /edge/bank ----

// sendBank POSTs to ts's /edge/bank the webhook Increase sends for d: an
// inbound_ach_transfer.created Event naming the accepted transfer that the
// stack's own sandbox Increase seals d into, signed with secret.
func sendBank(t *testing.T, ts *testStack, secret []byte, eventID string, d increasesandbox.Deposit) (int, map[string]any) {
	t.Helper()
	if d.At.IsZero() {
		d.At = time.Now().UTC().Truncate(time.Millisecond)
	}
	transfer, err := increasesandbox.New(ts.Secrets).TransferID(d)
	if err != nil {
		t.Fatal(err)
	}
	body, err := increase.MarshalEvent(increase.Event{
		ID: eventID, CreatedAt: d.At, Category: increase.CategoryInboundACHTransferCreated,
		AssociatedObjectType: "inbound_ach_transfer", AssociatedObjectID: transfer,
	})
	if err != nil {
		t.Fatal(err)
	}
	return postBank(t, ts, secret, eventID, body)
}

// postBank POSTs body to ts's /edge/bank signed with secret as Increase
// signs, under webhook-id id.
func postBank(t *testing.T, ts *testStack, secret []byte, id string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/edge/bank", bytes.NewReader(body))
	req.Header = increase.Sign(secret, id, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// withIncrease points a production stack's bank at an Increase (a fake).
func withIncrease(baseURL, apiKey, accountID string, webhookSecret []byte) stackOption {
	return func(c *stack.Config) {
		c.Increase = stack.IncreaseConfig{BaseURL: baseURL, APIKey: apiKey, AccountID: accountID}
		c.Vendors.Bank = webhookSecret
	}
}

// fakeIncrease is a fake Increase on loopback for a production stack: its
// listener is reserved before the stack starts (the stack needs its URL),
// and it is started once the stack runs (it needs the stack's edge).
type fakeIncrease struct {
	*increasefake.Fake
	api *httptest.Server
	// secret is the event subscription's shared secret the stack is
	// configured with.
	secret []byte
}

const (
	bankKey     = "increase_api_key_test"
	bankAccount = "account_church_gifts"
)

// reserveIncrease reserves a fake Increase's address.
func reserveIncrease(t *testing.T) *fakeIncrease {
	t.Helper()
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	return &fakeIncrease{api: api, secret: []byte("increase-subscription-secret")}
}

// option points a production stack's bank at the fake.
func (fi *fakeIncrease) option() stackOption {
	return withIncrease("http://"+fi.api.Listener.Addr().String(), bankKey, bankAccount, fi.secret)
}

// start serves the fake, holding the churches' Account and sending its
// webhooks to ts's edge signed with signWith (fi.secret, or a wrong one).
func (fi *fakeIncrease) start(t *testing.T, ts *testStack, signWith []byte) {
	t.Helper()
	fi.Fake = increasefake.New(increasefake.Options{
		APIKey: bankKey, WebhookURL: ts.URL + "/edge/bank", WebhookSecret: signWith,
		Retries: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
	})
	fi.AddAccount(bankAccount, "first_internet_bank")
	fi.api.Config.Handler = fi.Fake
	fi.api.Start()
	t.Cleanup(fi.Close)
}

// credit has Increase receive an ACH credit of cents to the church's
// deposit account (opened first, as the payroll step does), the way its
// sandbox simulation does: the accepted transfer is stored and its created
// Event sent to the edge. It returns the transfer.
func (fi *fakeIncrease) credit(t *testing.T, ts *testStack, church string, cents int64) increase.InboundACHTransfer {
	t.Helper()
	if _, err := ts.Bank.DepositAccount(context.Background(), church); err != nil {
		t.Fatal(err)
	}
	var number string
	for _, n := range fi.AccountNumbers() {
		if n.Name == "Church "+church {
			number = n.ID
		}
	}
	raw := fi.call(t, http.MethodPost, "/simulations/inbound_ach_transfers",
		fmt.Sprintf(`{"account_number_id":%q,"amount":%d,"company_name":"ACME PAYROLL"}`, number, cents))
	var tr increase.InboundACHTransfer
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatalf("simulation: %s", raw)
	}
	return tr
}

// call sends one request to the fake with the stack's key.
func (fi *fakeIncrease) call(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, fi.api.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bankKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return raw
}

// startProductionBank is a production stack whose bank is a fake Increase
// signing its webhooks with signWith (nil: the stack's secret), and whose
// dispatcher may deliver to loopback receivers.
func startProductionBank(t *testing.T, signWith []byte) (*testStack, *fakeIncrease) {
	t.Helper()
	fi := reserveIncrease(t)
	ts := startStack(t, withEnv(domain.Production), fi.option(),
		withWebhooks(func(c *dispatcher.Config) { loopback := dispatcher.PolicyFor(domain.Sandbox); c.Receivers = &loopback }))
	if signWith == nil {
		signWith = fi.secret
	}
	fi.start(t, ts, signWith)
	return ts, fi
}

// A production stack with Increase (a fake written from its documentation):
// the church's deposit account is an account number opened at Increase,
// Increase's inbound ACH credit webhook reaches the production edge, and
// deposit.received arrives on a real webhook receiver and on the feed,
// credited once though Increase sends the event again and announces the
// same transfer a second time. No donor's phone goes to Increase, and no
// bank data to the partner.
func TestProductionCreditFromIncrease(t *testing.T) {
	t.Parallel()
	ts, fi := startProductionBank(t, nil)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "deposit.received")
	ctx := context.Background()
	// A donor of the church: their phone never goes to the bank.
	const phone = "+12025550188"
	openSession(t, c, church, phone, "pct", "3", "https://partner.example/back")

	acct, err := ts.Bank.DepositAccount(ctx, church)
	if err != nil {
		t.Fatal(err)
	}
	numbers := fi.AccountNumbers()
	if len(numbers) != 1 || numbers[0].AccountNumber != acct.AccountNumber || acct.BankName != "First Internet Bank of Indiana" {
		t.Fatalf("deposit account %+v; account numbers at Increase %+v", acct, numbers)
	}
	transfer := fi.credit(t, ts, church, 12345)
	if len(fi.AccountNumbers()) != 1 {
		t.Fatal("asking again for the church's deposit account opened another account number")
	}
	for _, r := range fi.Requests() {
		if r.Authorization != "Bearer "+bankKey || (r.Method == http.MethodPost && r.IdempotencyKey == "" && r.Path == "/account_numbers") {
			t.Fatalf("%s %s: authorization %q, Idempotency-Key %q", r.Method, r.Path, r.Authorization, r.IdempotencyKey)
		}
		sweep(t, "a request to Increase", append([]byte(r.Path+" "), r.Body...), []string{phone})
	}
	pushed := waitDelivered(t, rc, "deposit.received", 1)[0]

	// Increase sends the event again, and the transfer's updated event.
	// The edge's answer reaches the fake's log a moment after the
	// deposit it recorded may already have been delivered.
	var first increasefake.Delivery
	waitFor(t, 10*time.Second, "the fake to log the first webhook's answer", func() bool {
		all := fi.Deliveries()
		if len(all) == 0 {
			return false
		}
		first = all[0]
		return len(first.Attempts) > 0
	})
	if !first.Delivered {
		t.Fatalf("the first webhook was not acknowledged: %+v", first)
	}
	again := fi.Deliver(ctx, increase.Event{ID: first.EventID, CreatedAt: time.Now(), Category: increase.CategoryInboundACHTransferCreated,
		AssociatedObjectType: "inbound_ach_transfer", AssociatedObjectID: transfer.ID})
	updated := fi.Deliver(ctx, increase.Event{ID: "event_updated_1", CreatedAt: time.Now(), Category: increase.CategoryInboundACHTransferUpdated,
		AssociatedObjectType: "inbound_ach_transfer", AssociatedObjectID: transfer.ID})
	if !again.Delivered || !updated.Delivered {
		t.Fatalf("repeats not acknowledged: %+v %+v", again, updated)
	}
	ts.waitProjected(t)
	if n := countEvents(t, ts, "deposit.received"); n != 1 {
		t.Fatalf("%d deposit.received, want 1", n)
	}
	feed := c.Do(http.MethodGet, "/v1/events?type=deposit.received", nil, nil)
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	feed.JSON(t, &page)
	if len(page.Data) != 1 {
		t.Fatalf("feed: %s", feed.Body)
	}
	for _, body := range [][]byte{page.Data[0], pushed.Body} {
		var env struct {
			ChurchID string `json:"church_id"`
			Payload  struct {
				Amount json.Number `json:"amount"`
				Trace  string      `json:"trace"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(body, &env); err != nil || env.Payload.Amount != "123.45" || env.Payload.Trace != transfer.TraceNumber || env.ChurchID != church {
			t.Fatalf("deposit.received: %s (%v)", body, err)
		}
		for _, secret := range []string{acct.AccountNumber, acct.RoutingNumber, numbers[0].ID} {
			if strings.Contains(string(body), secret) {
				t.Fatalf("bank data reached the partner: %s", secret)
			}
		}
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, err := ts.Store.ChurchBalance(pid, church); err != nil || bal.Total != 12345 || bal.Accounts[numbers[0].ID] != 12345 {
		t.Fatalf("balance %+v, %v", bal, err)
	}
	rc.verifyAll(t, ep.Secret)
}

// A webhook signed with another secret is refused with 401, every retry of
// it, and logged; nothing is credited.
func TestProductionRefusesABadBankSignature(t *testing.T) {
	t.Parallel()
	ts, fi := startProductionBank(t, []byte("not-the-subscription-secret"))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	if _, err := ts.Bank.DepositAccount(context.Background(), church); err != nil {
		t.Fatal(err)
	}
	before := ts.lastSeq(t)
	fi.credit(t, ts, church, 500)
	fi.Close()
	d := fi.Deliveries()
	if len(d) != 1 || d[0].Delivered || len(d[0].Attempts) != 3 {
		t.Fatalf("deliveries %+v", d)
	}
	for _, a := range d[0].Attempts {
		if a.Status != http.StatusUnauthorized {
			t.Fatalf("attempt answered %d, want 401", a.Status)
		}
	}
	if ts.lastSeq(t) != before {
		t.Fatal("a refused webhook appended to the ledger")
	}
	l := findLine(logLines(t, ts.Logs.String()), "vendor webhook rejected")
	if l == nil || l["vendor"] != "bank" || l["result"] != "invalid_signature" || !strings.Contains(l["reason"].(string), "signature") {
		t.Fatalf("log line %v", l)
	}
	if strings.Contains(ts.Logs.String(), "not-the-subscription-secret") || strings.Contains(ts.Logs.String(), string(fi.secret)) {
		t.Fatal("a secret was logged")
	}
}

// Increase's documented example, replayed against the production edge:
// with the subscription's secret it is accepted and credits the church the
// example's account number belongs to; with another, refused with 401. A
// credit to an account number no church was given is refused (422) and
// logged.
func TestIncreasesDocumentedExampleAtTheEdge(t *testing.T) {
	t.Parallel()
	ts, fi := startProductionBank(t, nil)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	fi.PutInboundACHTransfer(exampleTransfer(t))
	event := increasefake.ExampleEvent()
	var ev increase.Event
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}

	// Before the example's account number is any church's.
	code, body := postBank(t, ts, fi.secret, ev.ID, event)
	if code != http.StatusUnprocessableEntity || body["type"] != "/problems/unknown-reference" {
		t.Fatalf("a credit to no church's account number: %d %v", code, body)
	}
	if l := findLine(logLines(t, ts.Logs.String()), "a bank credit arrived on an account number that is no church's; the money is at the bank and no church was credited"); l == nil || l["account_number_id"] != "account_number_v18nkfqm6afpsrvy82b2" {
		t.Fatalf("no log line for the unknown account number: %v", l)
	}

	index, err := accountnumbers.Open(context.Background(), ts.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Put(context.Background(), "account_number_v18nkfqm6afpsrvy82b2", church); err != nil {
		t.Fatal(err)
	}
	if code, body := postBank(t, ts, []byte("wrong"), ev.ID, event); code != http.StatusUnauthorized {
		t.Fatalf("the example with a wrong secret: %d %v", code, body)
	}
	if code, body := postBank(t, ts, fi.secret, ev.ID, event); code != http.StatusOK || body["status"] != "accepted" {
		t.Fatalf("the example with the subscription's secret: %d %v", code, body)
	}
	ts.waitProjected(t)
	if bal, err := ts.Store.ChurchBalance(pid, church); err != nil || bal.Total != 100 || bal.Count != 1 {
		t.Fatalf("balance %+v, %v", bal, err)
	}
}

// exampleTransfer is the API reference's example Inbound ACH Transfer.
func exampleTransfer(t *testing.T) increase.InboundACHTransfer {
	t.Helper()
	var tr increase.InboundACHTransfer
	if err := json.Unmarshal(increasefake.ExampleInboundACHTransfer(), &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// On the sandbox, a simulated deposit travels the production edge through
// the sandbox's own Increase, and deposit.received is pushed, signed, to
// the partner's receiver; an amount Increase could not credit comes back
// refused, naming the amount.
func TestSimulatedDepositReachesAReceiver(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL, "deposit.received")
	resp := c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":42.05,"trace":"trc_push"}`, nil)
	if resp.Status != http.StatusOK || resp.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("simulate: %d %s", resp.Status, resp.Body)
	}
	waitFor(t, 10*time.Second, "deposit.received at the receiver", func() bool { return len(rc.deliveries()) == 1 })
	d := rc.deliveries()[0]
	if d.EventType != "deposit.received" || !strings.Contains(string(d.Body), `"amount":42.05`) || !strings.Contains(string(d.Body), `"trace":"trc_push"`) {
		t.Fatalf("delivery %s", d.Body)
	}
	rc.verifyAll(t, ep.Secret)

	// A fraction of a cent: the edge's refusal names the amount.
	resp = c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":1.005}`, nil)
	var refused struct {
		StatusCode int `json:"status_code"`
		Problem    struct {
			Errors []struct {
				Field string `json:"field"`
			} `json:"errors"`
		} `json:"problem"`
	}
	resp.JSON(t, &refused)
	if refused.StatusCode != http.StatusUnprocessableEntity || len(refused.Problem.Errors) != 1 || refused.Problem.Errors[0].Field != "amount" {
		t.Fatalf("a fraction of a cent: %s", resp.Body)
	}
}
