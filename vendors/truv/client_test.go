package truv_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
	"github.com/partnergiving/giving/vendors/truv/truvtest"
)

const (
	testClientID = "dd21ca23c12142b6a0970b1e0afedf16"
	testSecret   = "sandbox-a57b3109f1f4a8b3f2ebbc1c526950f1"
)

// startFake serves a fake Truv for one test.
func startFake(t *testing.T) *truvtest.Server {
	t.Helper()
	s := truvtest.NewServer(truvfake.Config{ClientID: testClientID, Secret: testSecret})
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client pointed at the fake.
func newClient(t *testing.T, fake *truvtest.Server, mod func(*truv.Config)) *truv.Client {
	t.Helper()
	cfg := truv.Config{BaseURL: fake.URL, ClientID: testClientID, Secret: testSecret, ClientName: "Grace Giving"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := truv.New(cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func churchAccount() truv.Account {
	return truv.Account{RoutingNumber: "021000021", AccountNumber: "000123456789", Type: truv.Checking, BankName: "First Community Bank"}
}

func switchRequest(a truv.Allocation) truv.SwitchRequest {
	return truv.SwitchRequest{EndUserID: "dn_2abcDEF", Reference: "en_2xyz", Target: churchAccount(), Allocation: a}
}

// decodeObject reads a recorded JSON body into a map, to see exactly which
// keys the client sent.
func decodeObject(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return m
}

func TestStartSwitchSendsWhatTruvDocuments(t *testing.T) {
	cases := []struct {
		name      string
		alloc     truv.Allocation
		wantType  string
		wantValue string
	}{
		{"percent with a decimal", truv.Percent(12_50), "percent", "12.5"},
		{"whole percent", truv.Percent(100_00), "percent", "100"},
		{"amount in cents", truv.Amount(25_55), "amount", "25.55"},
		{"smallest amount", truv.Amount(5), "amount", "0.05"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFake(t)
			c := newClient(t, fake, nil)
			sw, err := c.StartSwitch(context.Background(), switchRequest(tc.alloc))
			if err != nil {
				t.Fatalf("start switch: %v", err)
			}
			if sw.UserID == "" || sw.BridgeToken == "" {
				t.Fatalf("switch = %+v, want a user id and a bridge token", sw)
			}
			reqs := fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("fake got %d requests, want 2", len(reqs))
			}
			for _, r := range reqs {
				if r.Status >= 300 {
					t.Errorf("%s %s answered %d: %s", r.Method, r.Path, r.Status, r.Body)
				}
				if r.Header.Get("X-Access-Client-Id") != testClientID || r.Header.Get("X-Access-Secret") != testSecret {
					t.Errorf("%s: authentication headers %q/%q", r.Path, r.Header.Get("X-Access-Client-Id"), r.Header.Get("X-Access-Secret"))
				}
				if r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: content type %q", r.Path, r.Header.Get("Content-Type"))
				}
				if r.Header.Get("Authorization") != "" {
					t.Errorf("%s: sent an Authorization header Truv does not use", r.Path)
				}
			}

			user := decodeObject(t, reqs[0].Body)
			if reqs[0].Path != "/v1/users/" {
				t.Errorf("first call to %s, want /v1/users/", reqs[0].Path)
			}
			// Only the donor id goes to Truv: no name, phone, email or SSN.
			if keys := mapKeys(user); !slices.Equal(keys, []string{"external_user_id"}) || user["external_user_id"] != "dn_2abcDEF" {
				t.Errorf("user body = %v, want only external_user_id dn_2abcDEF", user)
			}

			if reqs[1].Path != "/v1/users/"+sw.UserID+"/tokens/" {
				t.Errorf("second call to %s, want the user's tokens path", reqs[1].Path)
			}
			tok := decodeObject(t, reqs[1].Body)
			want := map[string]any{
				"product_type":  "deposit_switch",
				"client_name":   "Grace Giving",
				"tracking_info": "en_2xyz",
				"account": map[string]any{
					"account_number": "000123456789",
					"account_type":   "checking",
					"routing_number": "021000021",
					"bank_name":      "First Community Bank",
					"deposit_type":   tc.wantType,
					"deposit_value":  tc.wantValue,
				},
			}
			if got, _ := json.Marshal(tok); string(got) != mustJSON(t, want) {
				t.Errorf("token body = %s\nwant %s", got, mustJSON(t, want))
			}
			tokens := fake.Tokens()
			if len(tokens) != 1 || tokens[0].Token != sw.BridgeToken || tokens[0].UserID != sw.UserID {
				t.Errorf("fake issued %+v, want the token the client returned", tokens)
			}
		})
	}
}

func TestStartSwitchReusesTheUserOfAnEarlierAttempt(t *testing.T) {
	fake := startFake(t)
	c := newClient(t, fake, nil)
	first, err := c.StartSwitch(context.Background(), switchRequest(truv.Percent(5_00)))
	if err != nil {
		t.Fatal(err)
	}
	req := switchRequest(truv.Percent(5_00))
	req.UserID = first.UserID
	req.ClientName = "St. Mark's"
	second, err := c.StartSwitch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.UserID != first.UserID || second.BridgeToken == first.BridgeToken {
		t.Errorf("second switch %+v, first %+v: want the same user and a new token", second, first)
	}
	if n := len(fake.Users()); n != 1 {
		t.Errorf("fake holds %d users, want 1", n)
	}
	last := fake.Requests()[2]
	if tok := decodeObject(t, last.Body); tok["client_name"] != "St. Mark's" {
		t.Errorf("client_name = %v, want the request's override", tok["client_name"])
	}
}

func TestStartSwitchReturnsTheUserWhenTheTokenFails(t *testing.T) {
	fake := startFake(t)
	fake.FailNextOn("/tokens/", 1, http.StatusServiceUnavailable)
	c := newClient(t, fake, nil)
	sw, err := c.StartSwitch(context.Background(), switchRequest(truv.Amount(10_00)))
	if !errors.Is(err, truv.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if sw.UserID == "" || sw.BridgeToken != "" {
		t.Fatalf("switch = %+v, want the created user and no token", sw)
	}
	req := switchRequest(truv.Amount(10_00))
	req.UserID = sw.UserID
	if _, err := c.StartSwitch(context.Background(), req); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := len(fake.Users()); n != 1 {
		t.Errorf("fake holds %d users after the retry, want 1", n)
	}
}

func TestStartSwitchRefusesBadInputWithoutCallingTruv(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*truv.SwitchRequest)
	}{
		{"short routing number", func(r *truv.SwitchRequest) { r.Target.RoutingNumber = "12345678" }},
		{"letters in routing number", func(r *truv.SwitchRequest) { r.Target.RoutingNumber = "02100002x" }},
		{"empty account number", func(r *truv.SwitchRequest) { r.Target.AccountNumber = "" }},
		{"account number too long", func(r *truv.SwitchRequest) { r.Target.AccountNumber = strings.Repeat("1", 18) }},
		{"unknown account type", func(r *truv.SwitchRequest) { r.Target.Type = "brokerage" }},
		{"no bank name", func(r *truv.SwitchRequest) { r.Target.BankName = " " }},
		{"zero percent", func(r *truv.SwitchRequest) { r.Allocation = truv.Percent(0) }},
		{"over 100 percent", func(r *truv.SwitchRequest) { r.Allocation = truv.Percent(100_01) }},
		{"negative amount", func(r *truv.SwitchRequest) { r.Allocation = truv.Amount(-1) }},
		{"amount over the ceiling", func(r *truv.SwitchRequest) { r.Allocation = truv.Amount(truv.MaxAmountHundredths + 1) }},
		{"unknown kind", func(r *truv.SwitchRequest) { r.Allocation = truv.Allocation{Kind: "entire", Hundredths: 1} }},
		{"no end user id", func(r *truv.SwitchRequest) { r.EndUserID = "" }},
		{"end user id with a space", func(r *truv.SwitchRequest) { r.EndUserID = "dn 1" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFake(t)
			c := newClient(t, fake, nil)
			req := switchRequest(truv.Percent(10_00))
			tc.mod(&req)
			_, err := c.StartSwitch(context.Background(), req)
			if !errors.Is(err, truv.ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("fake got %d requests, want none", n)
			}
		})
	}
}

func TestErrorsTellRefusalFromUnavailability(t *testing.T) {
	cases := []struct {
		name        string
		setup       func(*truvtest.Server, *truv.Config)
		call        func(*truv.Client) error
		refused     bool
		status      int
		code        string
		invalid     string // a field named in invalid-params
		retryAfter  time.Duration
		transportOK bool // the error wraps a transport error
	}{
		{
			name:    "wrong secret",
			setup:   func(_ *truvtest.Server, c *truv.Config) { c.Secret = "sandbox-wrong" },
			call:    startSwitch,
			refused: true, status: 403, code: "fake_forbidden",
		},
		{
			name: "unknown user",
			call: func(c *truv.Client) error {
				_, err := c.CreateBridgeToken(context.Background(), "nope", depositSwitchToken())
				return err
			},
			refused: true, status: 404,
		},
		{
			name: "product Truv does not know",
			call: func(c *truv.Client) error {
				u, err := c.CreateUser(context.Background(), "dn_1")
				if err != nil {
					return err
				}
				r := depositSwitchToken()
				r.ProductType = "payroll_magic"
				_, err = c.CreateBridgeToken(context.Background(), u.ID, r)
				return err
			},
			refused: true, status: 400, code: "incorrect_parameters", invalid: "product_type",
		},
		{
			name: "deposit switch without its account block",
			call: func(c *truv.Client) error {
				u, err := c.CreateUser(context.Background(), "dn_1")
				if err != nil {
					return err
				}
				r := depositSwitchToken()
				r.Account = nil
				_, err = c.CreateBridgeToken(context.Background(), u.ID, r)
				return err
			},
			refused: true, status: 400, code: "incorrect_parameters", invalid: "account",
		},
		{
			name:   "server error",
			setup:  func(f *truvtest.Server, _ *truv.Config) { f.FailNext(1, http.StatusBadGateway) },
			call:   startSwitch,
			status: 502,
		},
		{
			name:       "rate limited",
			setup:      func(f *truvtest.Server, _ *truv.Config) { f.FailNext(1, http.StatusTooManyRequests) },
			call:       startSwitch,
			status:     429,
			retryAfter: time.Second,
		},
		{
			name: "too slow",
			setup: func(f *truvtest.Server, c *truv.Config) {
				f.SetDelay(time.Second)
				c.Timeout = 50 * time.Millisecond
			},
			call:        startSwitch,
			transportOK: true,
		},
		{
			name:        "nothing listening",
			setup:       func(_ *truvtest.Server, c *truv.Config) { c.BaseURL = "http://127.0.0.1:1" },
			call:        startSwitch,
			transportOK: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFake(t)
			c := newClient(t, fake, func(cfg *truv.Config) {
				if tc.setup != nil {
					tc.setup(fake, cfg)
				}
			})
			err := tc.call(c)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, truv.ErrRefused); got != tc.refused {
				t.Errorf("Is(ErrRefused) = %v for %v", got, err)
			}
			if got := errors.Is(err, truv.ErrUnavailable); got == tc.refused {
				t.Errorf("Is(ErrUnavailable) = %v for %v", got, err)
			}
			var ref *truv.RefusedError
			var un *truv.UnavailableError
			switch {
			case errors.As(err, &ref):
				if ref.Status != tc.status || ref.Code != tc.code {
					t.Errorf("refused %d %q, want %d %q", ref.Status, ref.Code, tc.status, tc.code)
				}
				if tc.status == 404 && ref.Message != "Not Found." {
					t.Errorf("404 message %q, want Truv's detail", ref.Message)
				}
				if tc.invalid != "" && !slices.ContainsFunc(ref.InvalidParams, func(p truv.InvalidParam) bool { return p.Field == tc.invalid }) {
					t.Errorf("invalid params %v, want %s among them", ref.InvalidParams, tc.invalid)
				}
			case errors.As(err, &un):
				if un.Status != tc.status || un.RetryAfter != tc.retryAfter {
					t.Errorf("unavailable %d retry %s, want %d retry %s", un.Status, un.RetryAfter, tc.status, tc.retryAfter)
				}
				if (un.Err != nil) != tc.transportOK {
					t.Errorf("transport error %v, want one: %v", un.Err, tc.transportOK)
				}
			default:
				t.Errorf("error %T %v is neither refused nor unavailable", err, err)
			}
		})
	}
}

func TestNewRefusesAnIncompleteConfiguration(t *testing.T) {
	cases := []truv.Config{
		{ClientID: testClientID},
		{Secret: testSecret},
		{BaseURL: "ftp://example.test", ClientID: testClientID, Secret: testSecret},
		{BaseURL: "http://", ClientID: testClientID, Secret: testSecret},
	}
	for _, cfg := range cases {
		if _, err := truv.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
	if _, err := truv.New(truv.Config{ClientID: testClientID, Secret: testSecret}); err != nil {
		t.Errorf("New with Truv's default host: %v", err)
	}
}

func startSwitch(c *truv.Client) error {
	_, err := c.StartSwitch(context.Background(), switchRequest(truv.Percent(3_00)))
	return err
}

func depositSwitchToken() truv.BridgeTokenRequest {
	a := churchAccount()
	return truv.BridgeTokenRequest{
		ProductType: truv.ProductDepositSwitch,
		Account: &truv.AccountRequest{
			AccountNumber: a.AccountNumber, AccountType: string(a.Type), RoutingNumber: a.RoutingNumber,
			BankName: a.BankName, DepositType: "percent", DepositValue: "3",
		},
	}
}

func mapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
