package increasefake_test

import (
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

// receiver records the webhooks it gets, verified with secret, and answers
// status.
type receiver struct {
	secret []byte
	status int

	mu     sync.Mutex
	bodies [][]byte
	errs   []error
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	err := increase.Verify(rc.secret, r.Header, body, time.Now())
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, body)
	rc.errs = append(rc.errs, err)
	rc.mu.Unlock()
	w.WriteHeader(rc.status)
}

func TestCreditIsStoredAndAnnounced(t *testing.T) {
	secret := []byte("s")
	rc := &receiver{secret: secret, status: http.StatusNoContent}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	f := increasefake.New(increasefake.Options{APIKey: "k", WebhookURL: hook.URL, WebhookSecret: secret})
	api := httptest.NewServer(f)
	defer api.Close()

	c := increase.Credit{
		EventID: "event_e1", TransferID: "inbound_ach_transfer_t1", Trace: "091000010000001", AmountCents: 4200,
		AccountID: "account_a1", AccountNumberID: "account_number_n1", ReceivedAt: time.Now().UTC(),
	}
	if err := f.Credit(c); err != nil {
		t.Fatal(err)
	}
	f.Close()

	if len(rc.bodies) != 1 || rc.errs[0] != nil {
		t.Fatalf("webhooks %q, verification %v", rc.bodies, rc.errs)
	}
	ev, err := increase.ParseEvent(rc.bodies[0])
	if err != nil || ev.AssociatedObjectID != c.TransferID {
		t.Fatalf("event %+v, %v", ev, err)
	}
	if d := f.Deliveries(); len(d) != 1 || !d[0].Delivered {
		t.Fatalf("a 204 is a 2xx, so delivered: %+v", d)
	}

	client, err := increase.NewClient(api.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.InboundACHTransfer(context.Background(), c.TransferID)
	if err != nil || tr.TraceNumber != c.Trace || tr.Amount != "4200" {
		t.Fatalf("transfer %+v, %v", tr, err)
	}

	req, _ := http.NewRequest(http.MethodGet, api.URL+"/events/event_e1", nil)
	req.Header.Set("Authorization", "Bearer k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var served increase.Event
	if err := json.NewDecoder(res.Body).Decode(&served); err != nil || served.ID != "event_e1" || served.Type != "event" {
		t.Fatalf("GET /events: %+v, %v", served, err)
	}
}

// A credit the service could not read back never arrives: Credit refuses
// it with the production readers' reasons.
func TestCreditRefusesWhatCannotBeRead(t *testing.T) {
	good := increase.Credit{
		EventID: "event_1", TransferID: "inbound_ach_transfer_1", Trace: "091000019999999", AmountCents: 1,
		AccountID: "account_1", AccountNumberID: "account_number_1", ReceivedAt: time.Now(),
	}
	tests := map[string]func(c *increase.Credit){
		"zero amount":     func(c *increase.Credit) { c.AmountCents = 0 },
		"negative amount": func(c *increase.Credit) { c.AmountCents = -5 },
		"euros":           func(c *increase.Credit) { c.Currency = "EUR" },
		"no trace":        func(c *increase.Credit) { c.Trace = "" },
		"no account":      func(c *increase.Credit) { c.AccountNumberID = "" },
		"no time":         func(c *increase.Credit) { c.ReceivedAt = time.Time{} },
		"bad date":        func(c *increase.Credit) { c.EffectiveDate = "28/11/2026" },
		"bad transfer id": func(c *increase.Credit) { c.TransferID = "inbound/ach" },
	}
	f := increasefake.New(increasefake.Options{APIKey: "k"})
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			if err := f.Credit(c); !errors.Is(err, increase.ErrInvalidCredit) {
				t.Fatalf("Credit = %v, want ErrInvalidCredit", err)
			}
		})
	}
	c := good
	c.EventID = "evt/1"
	if err := f.Credit(c); !errors.Is(err, increase.ErrMalformedEvent) {
		t.Fatalf("Credit with a bad event id = %v, want ErrMalformedEvent", err)
	}
	if err := f.Credit(good); err != nil {
		t.Fatalf("the good credit is refused, so the cases above prove nothing: %v", err)
	}
}

func TestDeliverStopsWhenCancelled(t *testing.T) {
	rc := &receiver{secret: []byte("s"), status: http.StatusInternalServerError}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	f := increasefake.New(increasefake.Options{
		APIKey: "k", WebhookURL: hook.URL, WebhookSecret: []byte("s"),
		Retries: []time.Duration{time.Hour},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d := f.Deliver(ctx, increase.Event{ID: "event_e1", CreatedAt: time.Now(), Category: "account.created"})
	if d.Delivered || len(d.Attempts) != 1 || d.Attempts[0].Status != http.StatusInternalServerError {
		t.Fatalf("delivery = %+v", d)
	}
}

func TestPostSignsForTheReceiver(t *testing.T) {
	rc := &receiver{secret: []byte("right"), status: http.StatusOK}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	body := []byte(`{"id":"event_e1"}`)
	for _, secret := range []string{"right", "wrong"} {
		if _, err := increasefake.Post(context.Background(), http.DefaultClient, hook.URL, []byte(secret), "event_e1", body, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if rc.errs[0] != nil || rc.errs[1] == nil {
		t.Fatalf("verification with the right and a wrong secret: %v", rc.errs)
	}
}
