package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/vendors/truv"
)

// The payroll vendor's webhooks at /edge/payroll, as Truv sends them.

// sendTruv posts a Truv webhook body straight at the edge, signed with
// secret (unsigned when it is empty), and returns the edge's answer.
func sendTruv(t *testing.T, ts *testStack, secret string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/edge/payroll", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		for k, v := range truv.Sign(secret, body) {
			req.Header[k] = v
		}
	}
	resp := (&apitest.Client{TB: t}).Send(req, body)
	var m map[string]any
	_ = json.Unmarshal(resp.Body, &m)
	return resp.Status, m
}

// truvEvent builds a Truv webhook about the switch of enrollment.
func truvEvent(t *testing.T, id string, typ truv.EventType, enrollment string) []byte {
	t.Helper()
	e := truv.Event{ID: id, Type: typ, Reference: enrollment, UserID: truv.NewID(), LinkID: truv.NewID(), TaskID: truv.NewID()}
	body, err := truv.BuildEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestPayrollConfirmationActivatesExactlyOnce(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	_, en := enroll(t, ts, c, pid, church, "+12025550100")
	secret := string(ts.API.VendorSecrets().Payroll)

	// The same Truv webhook, 20 times at once, and 20 distinct ones
	// confirming the same switch: one enrollment.activated.
	same := truvEvent(t, "", truv.SwitchConfirmed, en)
	var wg sync.WaitGroup
	codes := make(chan int, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := same
			if i >= 20 {
				body = truvEvent(t, "", truv.SwitchConfirmed, en)
			}
			code, _ := sendTruv(t, ts, secret, body)
			codes <- code
		}()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("edge answered %d", code)
		}
	}
	if n := countEvents(t, ts, "enrollment.activated"); n != 1 {
		t.Fatalf("%d enrollment.activated events, want exactly 1", n)
	}
	recs, _, _ := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().OfType("enrollment.activated"), 0, 10)
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	_ = json.Unmarshal(recs[0].Data, &env)
	if string(env.Payload) != `{"enrollment_id":"`+en+`"}` {
		t.Fatalf("payload %s, want exactly {enrollment_id}", env.Payload)
	}
	var got struct {
		Status      string  `json:"status"`
		ActivatedAt *string `json:"activated_at"`
	}
	c.Do(http.MethodGet, "/v1/enrollments/"+en, nil, nil).JSON(t, &got)
	if got.Status != "active" || got.ActivatedAt == nil {
		t.Fatalf("enrollment after activation: %+v", got)
	}
}

// A Truv webhook that does not verify is refused with 401 and logged; one
// that is not Truv's is refused with 400; authentic events the service
// does not act on are acknowledged; a switch the service never opened is
// refused with 422. None of them writes anything.
func TestPayrollEdgeRefusesBadInput(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	secret := string(ts.API.VendorSecrets().Payroll)
	unknown := truvEvent(t, "", truv.SwitchConfirmed, "en_2pQm3s8JmYc5B9vXk0QeLr1nD7a")
	ignored, _ := json.Marshal(truv.Webhook{WebhookID: truv.NewID(), EventType: "employment-created", EventCreatedAt: truv.FormatTime(time.Now()), UserID: truv.NewID()})
	login, _ := json.Marshal(truv.Webhook{WebhookID: truv.NewID(), EventType: truv.EventTaskStatusUpdated, EventCreatedAt: truv.FormatTime(time.Now()),
		UserID: truv.NewID(), LinkID: truv.NewID(), TaskID: truv.NewID(), Product: truv.ProductDepositSwitch, Status: truv.StatusLogin})
	staleTruv, err := truv.BuildEvent(truv.Event{Type: truv.SwitchConfirmed, Reference: "en_2pQm3s8JmYc5B9vXk0QeLr1nD7a", UserID: truv.NewID(),
		LinkID: truv.NewID(), TaskID: truv.NewID(), OccurredAt: time.Now().Add(-8 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		secret string
		body   []byte
		want   int
		ack    string
	}{
		{"no signature", "", unknown, 401, ""},
		{"wrong secret", "nope", unknown, 401, ""},
		{"another vendor's secret", string(ts.API.VendorSecrets().Bank), unknown, 401, ""},
		{"not json", secret, []byte("{"), 400, ""},
		{"not a Truv webhook", secret, []byte(`{"id":"evt_1","type":"deposit_switch.confirmed"}`), 400, ""},
		{"another product's event", secret, ignored, 200, "ignored"},
		{"a task still signing in", secret, login, 200, "ignored"},
		{"a switch the service never opened", secret, unknown, 422, ""},
		{"a reference that is no enrollment", secret, truvEvent(t, "", truv.SwitchConfirmed, "applicant-7"), 422, ""},
		{"a switch of another integration (no tracking_info)", secret, truvEvent(t, "", truv.SwitchConfirmed, ""), 200, "ignored"},
		{"a week-old event (a replay)", secret, staleTruv, 401, ""},
	}
	before := ts.lastSeq(t)
	for _, tc := range cases {
		code, body := sendTruv(t, ts, tc.secret, tc.body)
		if code != tc.want || (tc.ack != "" && body["status"] != tc.ack) {
			t.Errorf("%s: %d %v, want %d %s", tc.name, code, body, tc.want, tc.ack)
		}
		if code >= 400 && body["type"] == nil {
			t.Errorf("%s: %d without a problem body: %v", tc.name, code, body)
		}
	}
	if ts.lastSeq(t) != before {
		t.Fatal("refused webhooks appended to the ledger")
	}
	if logs := ts.Logs.String(); !strings.Contains(logs, `"vendor":"payroll","result":"invalid_signature"`) || !strings.Contains(logs, `"message":"vendor webhook rejected"`) {
		t.Fatalf("a refused webhook was not logged with its reason:\n%s", logs)
	}
}

// A vendor event id handled once is acknowledged as a duplicate afterwards,
// even when handling it again would now be refused.
func TestVendorEventIDsAreRemembered(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	_, en := enroll(t, ts, c, pid, church, "+12025550100")
	body := truvEvent(t, "", truv.SwitchConfirmed, en)
	for i, want := range []string{"accepted", "duplicate", "duplicate"} {
		code, ack := sendTruv(t, ts, string(ts.API.VendorSecrets().Payroll), body)
		if code != http.StatusOK || ack["status"] != want {
			t.Fatalf("delivery %d: %d %v, want %s", i+1, code, ack, want)
		}
	}
}

// A donor who opened Truv Bridge and took longer than the url's 30 minutes
// keeps a session Truv's word can still complete: the API shows it open
// with its later deadline, the flow's page waits, and Truv's submission
// completes it; past the wait, it expires like any other.
func TestASwitchInProgressKeepsItsSessionOpen(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	secret := string(ts.API.VendorSecrets().Payroll)
	open := func() (sessionResponse, *donorBrowser) {
		s := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
		d := newDonorBrowser(t, s.URL, nil)
		verifiedDonor(t, d)
		d.open("").expect(t, http.StatusOK, "Connect your payroll")
		d.submit("payroll", nil).expect(t, http.StatusOK, "Connect your payroll") // the widget's page; the donor stays in Bridge
		return s, d
	}

	s, d := open()
	clock.advance(domain.SessionLifetime + time.Minute)
	got := getSession(t, c, s.ID)
	deadline, err := time.Parse(time.RFC3339, got.ExpiresAt)
	if got.Status != "open" || err != nil || !deadline.After(clock.now()) {
		t.Fatalf("a session whose switch is under way, past its url's expiry: %+v", got)
	}
	d.open("").expect(t, http.StatusOK, "Waiting for your payroll provider")
	en := switchEnrollment(t, ts, s.ID)
	if code, body := sendTruv(t, ts, secret, truvEvent(t, "", truv.SwitchSubmitted, en)); code != http.StatusOK {
		t.Fatalf("Truv's submission after the url expired: %d %v", code, body)
	}
	waitSessionStatus(t, c, s.ID, "completed")

	// Past the wait, the session expires.
	late, _ := open()
	clock.advance(domain.PayrollWait + time.Minute)
	waitSessionStatus(t, c, late.ID, "expired")
}

// getSession reads a donor session through the API.
func getSession(t *testing.T, c *apitest.Client, id string) sessionResponse {
	t.Helper()
	var s sessionResponse
	c.Do(http.MethodGet, "/v1/donor_sessions/"+id, nil, nil).JSON(t, &s)
	return s
}

// switchEnrollment is the enrollment the session's payroll switch names.
func switchEnrollment(t *testing.T, ts *testStack, sessionID string) string {
	t.Helper()
	for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.payroll_started") {
		if ev.AggregateID == sessionID {
			return ev.Payload.(*domain.PayrollSwitchStarted).EnrollmentID
		}
	}
	t.Fatalf("session %s opened no switch", sessionID)
	return ""
}
