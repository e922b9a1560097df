package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// integration is what a partner's webhook handler does with deliveries:
// verify each by the spec's rules, then act once per event_id.
type integration struct {
	secret    string
	processed map[string]int // event_id → times acted on (must stay 1)
	duplicate int            // deliveries recognised as already handled
}

func (in *integration) handle(t *testing.T, body []byte, signature string, at time.Time) {
	t.Helper()
	if err := verifySignature(in.secret, signature, body, at); err != nil {
		t.Fatalf("delivery fails verification: %v", err)
	}
	var env struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.EventID == "" {
		t.Fatalf("delivery is not an envelope: %s", body)
	}
	if in.processed[env.EventID] > 0 {
		in.duplicate++
		return
	}
	in.processed[env.EventID]++
}

// The spec's certification sequence, end to end: a real server, a real
// webhook receiver, the hosted flow in headless Chromium, the feed polled
// with stored cursors, and a delivery forced to repeat.
func TestCertificationSequence(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	ts := startStack(t, withRetrySchedule(repeatWait(5, 200*time.Millisecond)...))
	c, _ := ts.partner(t, "https://partner.example")

	// The receiver fails the first delivery of enrollment.activated after the
	// integration has acted on it, so the service delivers it again.
	var rc *receiver
	failedOnce := false
	rc = newReceiver(t, func(n int, _ *http.Request, _ http.ResponseWriter) int {
		if d := rc.deliveries()[n-1]; d.EventType == "enrollment.activated" && !failedOnce {
			failedOnce = true
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})

	// 1. Register an endpoint, store the secret, test delivery: delivered.
	ep := createEndpoint(t, c, rc.URL)
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("secret %q", ep.Secret)
	}
	in := &integration{secret: ep.Secret, processed: map[string]int{}}
	var test struct {
		Delivered bool `json:"delivered"`
	}
	c.Do(http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, nil).JSON(t, &test)
	if !test.Delivered {
		t.Fatal("step 1: the test delivery was not delivered")
	}
	waitDelivered(t, rc, "webhook_endpoint.test", 1)

	// 2. Import churches and keep the ids.
	var imp importResponse
	c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"Grace Chapel","external_id":"crm-1"},{"name":"St Mark"}]}`, nil).JSON(t, &imp)
	if len(imp.Results) != 2 || imp.Results[0].Church == nil || imp.Results[1].Church == nil {
		t.Fatalf("step 2: import %+v", imp)
	}
	church := imp.Results[0].Church.ID

	// 3. A donor session completed in the browser with a seed donor:
	// enrollment.created arrives on the webhook.
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/done")
	tb := b.tab(t)
	tb.open(s.URL, "Confirm it's you")
	tb.verifyPhone()
	tb.consent("Connect your payroll")
	tb.connectPayroll("user_good", "You're all set")
	created := waitDelivered(t, rc, "enrollment.created", 1)[0]
	var createdEnv struct {
		Payload struct {
			EnrollmentID   string `json:"enrollment_id"`
			DonorSessionID string `json:"donor_session_id"`
		} `json:"payload"`
	}
	_ = json.Unmarshal(created.Body, &createdEnv)
	if createdEnv.Payload.DonorSessionID != s.ID {
		t.Fatalf("step 3: enrollment.created for %s, want %s", createdEnv.Payload.DonorSessionID, s.ID)
	}
	en := createdEnv.Payload.EnrollmentID
	var createdFeed struct {
		Data []json.RawMessage `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/events?type=enrollment.created", nil, nil).JSON(t, &createdFeed)
	if len(createdFeed.Data) != 1 || !bytes.Equal(createdFeed.Data[0], created.Body) {
		t.Fatalf("step 3: enrollment.created on the feed %s differs from the webhook %s", createdFeed.Data, created.Body)
	}

	// 4. The payroll-connected simulator: enrollment.activated arrives — and,
	// because the first delivery failed, arrives again with the same id.
	resp := c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", map[string]string{"enrollment_id": en, "church_id": church}, nil)
	if resp.Status != http.StatusOK || string(resp.Body) != `{"status_code":200}` {
		t.Fatalf("step 4: simulator %d %s", resp.Status, resp.Body)
	}
	activated := waitDelivered(t, rc, "enrollment.activated", 2)
	if activated[0].EventID != activated[1].EventID || !bytes.Equal(activated[0].Body, activated[1].Body) {
		t.Fatalf("step 4: a repeated delivery differs: %s / %s", activated[0].Body, activated[1].Body)
	}
	if !bytes.Equal(activated[0].Body, []byte(`{"event_id":"`+activated[0].EventID+`","event_type":"enrollment.activated","occurred_at":`+string(field(t, activated[0].Body, "occurred_at"))+`,"church_id":"`+church+`","payload":{"enrollment_id":"`+en+`"}}`)) {
		t.Fatalf("step 4: envelope %s", activated[0].Body)
	}

	// 5. The feed: the same event, byte for byte; store next_cursor and poll
	// on from it.
	var page struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor string            `json:"next_cursor"`
		HasMore    bool              `json:"has_more"`
	}
	c.Do(http.MethodGet, "/v1/events?type=enrollment.activated", nil, nil).JSON(t, &page)
	if len(page.Data) != 1 || !bytes.Equal(page.Data[0], activated[0].Body) || page.HasMore {
		t.Fatalf("step 5: feed %+v", page)
	}
	cursor := page.NextCursor
	c.Do(http.MethodGet, "/v1/events?type=enrollment.activated&since_cursor="+url.QueryEscape(cursor), nil, nil).JSON(t, &page)
	if len(page.Data) != 0 || page.NextCursor != cursor {
		t.Fatalf("step 5: polling from the stored cursor: %+v", page)
	}
	// A new event after the cursor is what the next poll returns.
	c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":25.00}`, nil)
	c.Do(http.MethodGet, "/v1/events?type=enrollment.activated,deposit.received&wait=5&since_cursor="+url.QueryEscape(cursor), nil, nil).JSON(t, &page)
	if len(page.Data) != 1 || string(field(t, page.Data[0], "event_type")) != `"deposit.received"` {
		t.Fatalf("step 5: the poll after the cursor: %+v", page)
	}

	// 6. The integration deduplicates by event_id: every delivery and the
	// feed item for the same event act once.
	for _, d := range rc.deliveries() {
		in.handle(t, d.Body, d.Signature, d.At)
	}
	for id, n := range in.processed {
		if n != 1 {
			t.Fatalf("step 6: event %s acted on %d times", id, n)
		}
	}
	if in.processed[activated[0].EventID] != 1 || in.duplicate < 1 {
		t.Fatalf("step 6: the repeated delivery was not recognised as a duplicate (%d duplicates)", in.duplicate)
	}
}

// waitDelivered waits until the receiver has n deliveries of eventType and
// returns them.
func waitDelivered(t *testing.T, rc *receiver, eventType string, n int) []delivery {
	t.Helper()
	var got []delivery
	waitFor(t, 20*time.Second, eventType+" delivered", func() bool {
		got = got[:0]
		for _, d := range rc.deliveries() {
			if d.EventType == eventType {
				got = append(got, d)
			}
		}
		return len(got) >= n
	})
	return got
}

func field(t *testing.T, body []byte, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return m[name]
}

// giving certify, run against a server started here, passes every step,
// deletes the endpoint it registered and archives the churches it
// imported; with a bad key it fails and says why.
func TestCertifyCommand(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://localhost")
	r := runCLI(t, nil, "certify", "--base-url", ts.URL, "--api-key", c.Key, "--timeout", "20s")
	if r.Code != 0 {
		t.Fatalf("certify failed: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for i := 1; i <= 6; i++ {
		if !strings.Contains(r.Stdout, "[PASS] "+string(rune('0'+i))+".") {
			t.Fatalf("step %d did not pass:\n%s", i, r.Stdout)
		}
	}
	if !strings.Contains(r.Stdout, "Result: CERTIFIED") {
		t.Fatalf("no verdict:\n%s", r.Stdout)
	}
	t.Logf("certify:\n%s", r.Stdout)
	var list struct {
		Data []any `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/webhook_endpoints", nil, nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("certify left %d endpoints registered", len(list.Data))
	}
	var churches struct {
		Data []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/churches", nil, nil).JSON(t, &churches)
	if len(churches.Data) != 2 {
		t.Fatalf("certify imported %d churches, want 2", len(churches.Data))
	}
	for _, ch := range churches.Data {
		if ch.Status != "archived" {
			t.Fatalf("certify left %s %s", ch.Name, ch.Status)
		}
	}

	// A key that is not accepted: step 1 fails with the reason, exit non-zero.
	badKey := "sk_test_" + strings.Repeat("x", 32)
	r = runCLI(t, nil, "certify", "--base-url", ts.URL, "--api-key", badKey, "--timeout", "5s")
	if r.Code == 0 || !strings.Contains(r.Stdout, "[FAIL] 1.") || !strings.Contains(r.Stdout, "401") || !strings.Contains(r.Stdout, "Result: FAILED") {
		t.Fatalf("certify with a bad key: exit %d\n%s", r.Code, r.Stdout)
	}
}

// Every way certify can fail names its cause: the receiver's error or
// answer, an address without a scheme, a service that is not there, a
// redirect_url off the allowlist.
func TestCertifyNamesTheCause(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://localhost")
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	ports := freePorts(t, 2) // nothing listens on them
	closed := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// A receiver in front of certify's own that passes the test delivery on
	// and fails every other: step 3 waits in vain and reads why from the
	// delivery log.
	listen := fmt.Sprintf("127.0.0.1:%d", ports[1])
	picky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"event_type":"webhook_endpoint.test"`)) {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks", bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}))
	defer picky.Close()
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"unreachable receiver", []string{"--base-url", ts.URL, "--webhook-url", "http://" + closed + "/hooks"}, 1,
			[]string{"[FAIL] 1.", "http://" + closed + "/hooks was not delivered: connection refused", "Result: FAILED"}},
		{"receiver answers 503", []string{"--base-url", ts.URL, "--webhook-url", refusing.URL + "/hooks"}, 1,
			[]string{"[FAIL] 1.", "the receiver answered 503"}},
		{"webhooks failing after the test", []string{"--base-url", ts.URL, "--webhook-listen", listen, "--webhook-url", picky.URL + "/hooks"}, 1,
			[]string{"[PASS] 2.", "[FAIL] 3.", "enrollment.created did not reach the receiver", "the last attempt to deliver it to " + picky.URL + "/hooks: the receiver answered 500 Internal Server Error (outcome failed)"}},
		{"service not running", []string{"--base-url", "http://" + closed}, 1,
			[]string{"[FAIL] 1.", "could not be reached (is it running, and is that its address?)"}},
		{"redirect_url off the allowlist", []string{"--base-url", ts.URL, "--redirect-url", "https://elsewhere.example/done"}, 1,
			[]string{"[PASS] 2.", "[FAIL] 3.", "answered 422", "redirect_url", "pass --redirect-url with an https URL on one of them"}},
		{"base URL without a scheme", []string{"--base-url", strings.TrimPrefix(ts.URL, "http://")}, 2,
			[]string{"--base-url", "is not an absolute http(s) URL (did you mean " + ts.URL + "?)"}},
		{"webhook URL without a scheme", []string{"--base-url", ts.URL, "--webhook-url", closed + "/hooks"}, 2,
			[]string{"--webhook-url", "did you mean http://" + closed + "/hooks?"}},
		{"a live key", []string{"--base-url", ts.URL, "--api-key", "sk_live_" + strings.Repeat("x", 32)}, 2,
			[]string{"--api-key must be a sandbox key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"certify", "--api-key", c.Key, "--timeout", "5s"}, tc.args...)
			r := runCLI(t, nil, args...)
			out := r.Stdout + r.Stderr
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", r.Code, tc.code, out)
			}
			for _, want := range tc.wants {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// giving sandbox complete-flow, against a running stack: the enrollment on
// stdout; a declined donor, a wrong code, a refused payroll sign-in and a
// url that is not a session's each end it non-zero, saying why.
func TestSandboxCompleteFlowCommand(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://localhost")
	church := importChurch(t, c, "Grace")
	session := func(phone string) string {
		return openSession(t, c, church, phone, "pct", "3", "https://localhost/done").URL
	}
	flow := func(url string, args ...string) cliResult {
		return runCLI(t, nil, append([]string{"sandbox", "complete-flow", url, "--api-key", c.Key, "--timeout", "20s"}, args...)...)
	}
	ok := flow(session("+12025550100"))
	if en := strings.TrimSpace(ok.Stdout); ok.Code != 0 || !domain.ValidID(domain.PrefixEnrollment, en) || !strings.Contains(ok.Stderr, "flow: You're all set") {
		t.Fatalf("complete-flow: exit %d %q\n%s", ok.Code, ok.Stdout, ok.Stderr)
	}
	for _, tc := range []struct {
		name string
		r    cliResult
		code int
		want string
	}{
		{"declined donor", flow(session("+12025550102")), 1, "ended declined"},
		{"wrong code", flow(session("+12025550100"), "--phone-code", "123456"), 1, `the flow refused the answers at "Confirm it's you": That code is not right`},
		{"payroll refuses", flow(session("+12025550100"), "--username", "user_bad"), 1, "the payroll widget refused the sign-in"},
		{"stopping without --state", flow(session("+12025550100"), "--stop-at-identity"), 2, "--stop-at-identity needs --state"},
		{"not a session url", flow(ts.URL + "/v1/donor_sessions"), 2, "is not a donor session's url"},
		{"no key", runCLI(t, nil, "sandbox", "complete-flow", session("+12025550100")), 2, "--api-key must be"},
	} {
		if tc.r.Code != tc.code || !strings.Contains(tc.r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", tc.name, tc.r.Code, tc.r.Stderr, tc.code, tc.want)
		}
	}
	// A donor who is not a seed goes to the identity stand-in's page and
	// waits there for the simulator; the same browser then goes on.
	waiting := openSession(t, c, church, "+12025550123", "pct", "3", "https://localhost/done")
	state := filepath.Join(t.TempDir(), "donor.json")
	stop := flow(waiting.URL, "--stop-at-identity", "--state", state)
	if stop.Code != 0 || !strings.Contains(stop.Stderr, "flow: Verify your identity") || !strings.Contains(stop.Stderr, "the donor waits for identity verification") {
		t.Fatalf("stop at identity: exit %d\n%s", stop.Code, stop.Stderr)
	}
	simulateKYC(t, c, church, waiting.DonorID, "passed")
	if r := flow(waiting.URL, "--state", state); r.Code != 0 || !domain.ValidID(domain.PrefixEnrollment, strings.TrimSpace(r.Stdout)) {
		t.Fatalf("after the identity decision: exit %d %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// The flow is bound to the first browser: a second one is told so.
	url := session("+12025550100")
	flow(url)
	if r := flow(url); r.Code != 1 || !strings.Contains(r.Stderr, "the hosted flow answered 403") {
		t.Errorf("a second browser: exit %d %q", r.Code, r.Stderr)
	}
}
