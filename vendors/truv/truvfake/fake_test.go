package truvfake_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
	"github.com/partnergiving/giving/vendors/truv/truvtest"
)

const (
	clientID = "dd21ca23c12142b6a0970b1e0afedf16"
	secret   = "sandbox-a57b3109f1f4a8b3f2ebbc1c526950f1"
)

// edge stands in for the service's edge route: it verifies each webhook
// the way production will and keeps what it accepted.
type edge struct {
	mu       sync.Mutex
	events   []truv.Event
	ignored  []truv.Event
	bodies   [][]byte
	refusals int
}

func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := (truv.Verifier{Secrets: []string{secret}}).Verify(r.Header, body); err != nil {
		e.refusals++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	e.bodies = append(e.bodies, body)
	ev, err := truv.ParseEvent(body)
	switch {
	case errors.Is(err, truv.ErrIgnored):
		e.ignored = append(e.ignored, ev)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	default:
		e.events = append(e.events, ev)
	}
	w.WriteHeader(http.StatusOK)
}

func (e *edge) accepted() ([]truv.Event, []truv.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]truv.Event(nil), e.events...), append([]truv.Event(nil), e.ignored...)
}

// setup starts the fake, an edge, and opens one switch through the real
// client, as the service will.
func setup(t *testing.T) (*truvtest.Server, *edge, truv.Switch) {
	t.Helper()
	fake := truvtest.NewServer(truvfake.Config{ClientID: clientID, Secret: secret})
	t.Cleanup(fake.Close)
	e := &edge{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	fake.SetWebhookURL(srv.URL + "/vendor/truv")
	c, err := truv.New(truv.Config{BaseURL: fake.URL, ClientID: clientID, Secret: secret, ClientName: "Grace Giving"})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := c.StartSwitch(context.Background(), truv.SwitchRequest{
		EndUserID: "dn_1", Reference: "en_1",
		Target:     truv.Account{RoutingNumber: "021000021", AccountNumber: "000123456789", Type: truv.Checking, BankName: "First Community Bank"},
		Allocation: truv.Percent(12_50),
	})
	if err != nil {
		t.Fatal(err)
	}
	return fake, e, sw
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func signIn(t *testing.T, u, user string) (int, string) {
	t.Helper()
	resp, err := http.PostForm(u, url.Values{"username": {user}, "password": {"hunter2-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestWidgetShowsTheSwitchTheTokenCarries(t *testing.T) {
	fake, _, sw := setup(t)
	status, page := get(t, fake.URL+"/bridge/"+sw.BridgeToken)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	for _, want := range []string{"Grace Giving", "12.5% of each paycheck", "First Community Bank", "ending 6789", `name="username"`, `type="password"`} {
		if !strings.Contains(page, want) {
			t.Errorf("widget page lacks %q", want)
		}
	}
	if status, _ := get(t, fake.URL+"/bridge/not-a-token"); status != http.StatusNotFound {
		t.Errorf("unknown token answered %d, want 404", status)
	}
}

func TestWidgetOutcomes(t *testing.T) {
	cases := []struct {
		user        string
		wantPage    string
		wantEvents  []truv.EventType
		wantIgnored []string // vendor event type and status of the ignored ones
		wantReason  string
	}{
		{
			user: truvfake.UserGood, wantPage: "was submitted",
			wantEvents:  []truv.EventType{truv.SwitchSubmitted, truv.SwitchConfirmed},
			wantIgnored: []string{"task-status-updated login", "link-connected "},
		},
		{
			user: truvfake.UserBad, wantPage: "could not sign you in",
			wantEvents:  []truv.EventType{truv.SwitchFailed},
			wantIgnored: []string{"task-status-updated login"},
			wantReason:  "login_error",
		},
		{user: "someone_else", wantPage: "Unknown test user"},
	}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			fake, e, sw := setup(t)
			status, page := signIn(t, fake.URL+"/bridge/"+sw.BridgeToken, tc.user)
			if status != http.StatusOK || !strings.Contains(page, tc.wantPage) {
				t.Fatalf("status %d, page lacks %q:\n%s", status, tc.wantPage, page)
			}
			events, ignored := e.accepted()
			if len(events) != len(tc.wantEvents) {
				t.Fatalf("edge accepted %+v, want %v", events, tc.wantEvents)
			}
			for i, ev := range events {
				if ev.Type != tc.wantEvents[i] || ev.UserID != sw.UserID || ev.Reference != "en_1" || ev.LinkID == "" || ev.TaskID == "" {
					t.Errorf("event %d = %+v, want %s for the switch's user and reference", i, ev, tc.wantEvents[i])
				}
				if ev.Type == truv.SwitchFailed && ev.Reason != tc.wantReason {
					t.Errorf("reason %q, want %q", ev.Reason, tc.wantReason)
				}
			}
			var got []string
			for _, ev := range ignored {
				got = append(got, ev.VendorType+" "+ev.Status)
			}
			if strings.Join(got, "|") != strings.Join(tc.wantIgnored, "|") {
				t.Errorf("ignored %q, want %q", got, tc.wantIgnored)
			}
			for _, d := range fake.Deliveries() {
				if d.Status != http.StatusOK || d.Err != nil {
					t.Errorf("delivery answered %d %v", d.Status, d.Err)
				}
				// The donor's payroll credentials never leave the widget.
				if bytes.Contains(d.Body, []byte("hunter2")) || bytes.Contains(d.Body, []byte(tc.user)) {
					t.Errorf("webhook carries the sign-in: %s", d.Body)
				}
			}
			for _, r := range fake.Requests() {
				if strings.HasPrefix(r.Path, "/bridge") {
					t.Errorf("the widget's sign-in was recorded: %s", r.Path)
				}
			}
		})
	}
}

func TestSuccessPageHandsBridgeAPublicToken(t *testing.T) {
	fake, _, sw := setup(t)
	_, page := signIn(t, fake.URL+"/bridge/"+sw.BridgeToken, truvfake.UserGood)
	for _, want := range []string{`"type":"SUCCESS"`, `"public_token":"`, "postMessage"} {
		if !strings.Contains(page, want) {
			t.Errorf("success page lacks %q", want)
		}
	}
	_, page = signIn(t, fake.URL+"/bridge/"+sw.BridgeToken, truvfake.UserBad)
	if !strings.Contains(page, `"error_code":"LOGIN_ERROR"`) {
		t.Errorf("failure page lacks Bridge's LOGIN_ERROR error object")
	}
}

func TestBridgeScriptStandsInForTruvs(t *testing.T) {
	fake, _, _ := setup(t)
	status, js := get(t, fake.BridgeScriptURL())
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	for _, want := range []string{"window.TruvBridge", "init: function (opts)", `"` + fake.URL + `"`, "onSuccess", "onClose", "/bridge/"} {
		if !strings.Contains(js, want) {
			t.Errorf("script lacks %q", want)
		}
	}
}

func TestSendReportsTheEdgeAnswer(t *testing.T) {
	fake, e, sw := setup(t)
	ctx := context.Background()
	d, err := fake.Send(ctx, truv.Event{Type: truv.SwitchConfirmed, UserID: sw.UserID, Reference: "en_1", LinkID: "l1", TaskID: "t1"})
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("send: %d %v", d.Status, err)
	}
	if events, _ := e.accepted(); len(events) != 1 || events[0].Type != truv.SwitchConfirmed {
		t.Fatalf("edge accepted %+v", events)
	}

	// A fake with another secret is refused by the edge, and Send says so.
	other := truvfake.New(truvfake.Config{ClientID: clientID, Secret: "sandbox-other", WebhookURL: d.URL})
	d, err = other.Send(ctx, truv.Event{Type: truv.SwitchConfirmed, LinkID: "l1", TaskID: "t1"})
	if err != nil || d.Status != http.StatusUnauthorized {
		t.Errorf("send with the wrong secret: %d %v, want 401", d.Status, err)
	}

	if _, err := fake.Send(ctx, truv.Event{Type: "nonsense"}); err == nil {
		t.Error("sent an event Truv has no form for")
	}
	lone := truvfake.New(truvfake.Config{ClientID: clientID, Secret: secret})
	if d, _ := lone.Send(ctx, truv.Event{Type: truv.SwitchReverted, LinkID: "l1"}); !errors.Is(d.Err, truvfake.ErrNoWebhookURL) {
		t.Errorf("send without a URL: %v", d.Err)
	}
}

// TestAPIChecks sends the fake what a careless client might, to show the
// fake refuses it as Truv documents.
func TestAPIChecks(t *testing.T) {
	fake := truvtest.NewServer(truvfake.Config{ClientID: clientID, Secret: secret})
	defer fake.Close()
	userID := createUser(t, fake)
	account := `"account_number":"1600200","account_type":"checking","routing_number":"123456789","bank_name":"Truv Bank"`
	cases := []struct {
		name       string
		path       string
		header     map[string]string
		body       string
		wantStatus int
		wantInBody string
	}{
		{"no credentials", "/v1/users/", map[string]string{"X-Access-Client-Id": "", "X-Access-Secret": ""}, `{}`, 403, `"error"`},
		{"secret of another account", "/v1/users/", map[string]string{"X-Access-Secret": "sandbox-other"}, `{}`, 403, `"error"`},
		{"form body", "/v1/users/", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, `external_user_id=1`, 415, `"error"`},
		{"unknown path", "/v1/payroll/", nil, `{}`, 404, `"detail":"Not Found."`},
		{"token for a missing user", "/v1/users/missing/tokens/", nil, `{"product_type":"income"}`, 404, `"detail":"Not Found."`},
		{"percent above 100", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"deposit_switch","account":{` + account + `,"deposit_type":"percent","deposit_value":"150"}}`, 400, "account.deposit_value"},
		{"unknown deposit type", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"deposit_switch","account":{` + account + `,"deposit_type":"half","deposit_value":"1"}}`, 400, "account.deposit_type"},
		{"missing bank name", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"deposit_switch","account":{"account_number":"1","account_type":"checking","routing_number":"123456789","deposit_type":"amount","deposit_value":"1"}}`, 400, "account.bank_name"},
		{"deposit value as a number, as Truv's demo sends it", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"pll","account":{` + account + `,"deposit_type":"amount","deposit_value":100}}`, 200, `"bridge_token"`},
		{"entire paycheck needs no value", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"deposit_switch","account":{` + account + `,"deposit_type":"entire"}}`, 200, `"bridge_token"`},
		{"income needs no account", "/v1/users/" + userID + "/tokens/", nil, `{"product_type":"income"}`, 200, `"product_type":"income"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, fake.URL+tc.path, tc.header, tc.body)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantInBody) {
				t.Errorf("answered %d %s, want %d with %s", status, body, tc.wantStatus, tc.wantInBody)
			}
		})
	}
}

func createUser(t *testing.T, fake *truvtest.Server) string {
	t.Helper()
	c, err := truv.New(truv.Config{BaseURL: fake.URL, ClientID: clientID, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.CreateUser(context.Background(), "dn_1")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func post(t *testing.T, u string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Client-Id", clientID)
	req.Header.Set("X-Access-Secret", secret)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTokensOpenOnAnyInstance: the sandbox runs a stand-in in every
// service instance; a token one minted must open the widget on another,
// and only while Truv's six hours last.
func TestTokensOpenOnAnyInstance(t *testing.T) {
	_, _, sw := setup(t)
	now := time.Now()
	clock := func() time.Time { return now }
	other := truvtest.NewServer(truvfake.Config{ClientID: clientID, Secret: secret, Now: clock})
	defer other.Close()
	if status, page := get(t, other.URL+"/bridge/"+sw.BridgeToken); status != http.StatusOK || !strings.Contains(page, "12.5% of each paycheck") {
		t.Fatalf("another instance answered %d", status)
	}
	stranger := truvtest.NewServer(truvfake.Config{ClientID: clientID, Secret: "sandbox-other"})
	defer stranger.Close()
	if status, _ := get(t, stranger.URL+"/bridge/"+sw.BridgeToken); status != http.StatusNotFound {
		t.Errorf("an account with another secret answered %d, want 404", status)
	}
	if status, _ := get(t, other.URL+"/bridge/"+sw.BridgeToken+"x"); status != http.StatusNotFound {
		t.Errorf("a tampered token answered %d, want 404", status)
	}
	if status, _ := post(t, other.URL+"/v1/users/"+sw.UserID+"/tokens/", nil, `{"product_type":"income"}`); status != http.StatusOK {
		t.Errorf("another instance refused the user with %d", status)
	}
	now = now.Add(6*time.Hour + time.Minute)
	if status, _ := get(t, other.URL+"/bridge/"+sw.BridgeToken); status != http.StatusNotFound {
		t.Errorf("a token past six hours answered %d, want 404", status)
	}
}

// TestMountedUnderAPath: the sandbox may serve the stand-in under a path of
// its own; the script then opens the widget there.
func TestMountedUnderAPath(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	fake := truvfake.New(truvfake.Config{ClientID: clientID, Secret: secret, PublicURL: srv.URL + "/vendor-sandbox/truv/"})
	mux.Handle("/vendor-sandbox/truv/", http.StripPrefix("/vendor-sandbox/truv", fake))

	c, err := truv.New(truv.Config{BaseURL: srv.URL + "/vendor-sandbox/truv", ClientID: clientID, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := c.StartSwitch(context.Background(), truv.SwitchRequest{
		EndUserID:  "dn_1",
		Target:     truv.Account{RoutingNumber: "021000021", AccountNumber: "1234", Type: truv.Savings, BankName: "Bank"},
		Allocation: truv.Amount(20_00),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, js := get(t, srv.URL+"/vendor-sandbox/truv/bridge.js")
	if !strings.Contains(js, `"`+srv.URL+`/vendor-sandbox/truv"`) || !strings.Contains(js, `origin = "`+srv.URL+`"`) {
		t.Errorf("script does not open the widget under the path:\n%s", js)
	}
	if status, page := get(t, srv.URL+"/vendor-sandbox/truv/bridge/"+sw.BridgeToken); status != http.StatusOK || !strings.Contains(page, "$20.00 from each paycheck") {
		t.Errorf("widget under the path answered %d", status)
	}
}
