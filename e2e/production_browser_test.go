package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
	"github.com/partnergiving/giving/vendors/truv/truvtest"
)

// withTruv points the production stack at a local Truv.
func withTruv(f *truvtest.Server, clientID, secret string) stackOption {
	return func(c *stack.Config) {
		c.Truv = stack.TruvConfig{ClientID: clientID, Secret: secret, BaseURL: f.URL, BridgeScriptURL: f.BridgeScriptURL()}
	}
}

// TestProductionEnrollsThroughTheVendors is a donor enrolling on the
// production stack, in Chromium, against local fakes of every vendor:
// Twilio Verify sends the code, Stripe Identity's hosted page (the fake's,
// on its own origin) verifies the donor and Stripe's signed webhook passes
// them, Truv Bridge (the fake's widget, on its own origin) connects payroll, Truv's signed webhooks create and activate the
// enrollment, which the partner's receiver and feed get. It checks what
// the service sent each vendor, and that a refused payroll connection and
// a forged webhook change nothing.
func TestProductionEnrollsThroughTheVendors(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	tw := startTwilio(t, "424242")
	truvAPI := truvtest.NewServer(truvfake.Config{ClientID: "truv-client", Secret: "truv-secret"})
	t.Cleanup(truvAPI.Close)
	stripe, stripeEdge := startStripe(t)
	bank := reserveIncrease(t)
	ts := startStack(t, withEnv(domain.Production), withSMS(tw.verifier), withTruv(truvAPI, "truv-client", "truv-secret"), withStripe(stripe), bank.option(),
		withWebhooks(func(c *dispatcher.Config) { loopback := dispatcher.PolicyFor(domain.Sandbox); c.Receivers = &loopback }))
	truvAPI.SetWebhookURL(ts.URL + "/edge/payroll")
	stripeEdge.pointAt(t, ts.URL)
	bank.start(t, ts, bank.secret)
	c, _ := ts.partner(t)
	rc := okReceiver(t)
	createEndpoint(t, c, rc.URL)
	church := importChurch(t, c, "Grace Chapel")

	enrollUntilPayroll := func(phone string) (sessionResponse, *tab) {
		s := openSession(t, c, church, phone, "fixed", "25", "https://partner.example/done")
		tb := b.tab(t)
		tb.open(s.URL, "Confirm it's you")
		tb.verifyPhoneWith("424242")
		// Identity at Stripe's hosted page (the fake's), and back.
		tb.consent("Check your identity")
		tb.click("#identity", "Verify your identity")
		tb.click(`button[value="verify"]`, "Connect your payroll")
		return s, tb
	}

	// A refused sign-in in Truv Bridge: the donor is told, and may retry.
	s, tb := enrollUntilPayroll("+12025550188")
	tb.openPayrollWidget()
	tb.payrollWidget("sign in as user_bad", func(f *chromedp.Node) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.SendKeys(chromedp.CSS("#username"), truvfake.UserBad, chromedp.FromNode(f), chromedp.NodeVisible),
			chromedp.SendKeys(chromedp.CSS("#password"), "secret", chromedp.FromNode(f), chromedp.NodeVisible),
			chromedp.Click(chromedp.CSS("button[type=submit]"), chromedp.FromNode(f), chromedp.NodeVisible),
		}
	})
	waitFor(t, 20*time.Second, "Truv's login_error to reach the edge", func() bool {
		return payrollFailures(t, ts, s.ID) == 1
	})
	tb.open(s.URL, "We couldn't connect your payroll")

	// The way through: Truv Bridge submits the switch and Truv confirms it.
	s, tb = enrollUntilPayroll("+12025550199")
	tb.connectPayroll(truvfake.UserGood, "You're all set")
	created := waitDelivered(t, rc, "enrollment.created", 1)[0]
	var env struct {
		Payload struct {
			EnrollmentID   string `json:"enrollment_id"`
			DonorSessionID string `json:"donor_session_id"`
		} `json:"payload"`
	}
	_ = json.Unmarshal(created.Body, &env)
	en := env.Payload.EnrollmentID
	if env.Payload.DonorSessionID != s.ID {
		t.Fatalf("enrollment.created for %s, want %s", env.Payload.DonorSessionID, s.ID)
	}
	activated := waitDelivered(t, rc, "enrollment.activated", 1)[0]
	if !strings.Contains(string(activated.Body), en) {
		t.Fatalf("enrollment.activated: %s", activated.Body)
	}
	var feed struct {
		Data []struct {
			Payload map[string]any `json:"payload"`
		} `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/events?type=enrollment.activated", nil, nil).JSON(t, &feed)
	if len(feed.Data) != 1 || feed.Data[0].Payload["enrollment_id"] != en {
		t.Fatalf("the feed's enrollment.activated: %+v", feed.Data)
	}

	// What Truv got: the service's credentials, the donor's id and nothing
	// else about the donor, the church's account and the gift as the
	// switch's allocation, the enrollment as the reference.
	var tokens []truvfake.Token
	for _, tok := range truvAPI.Tokens() {
		if tok.TrackingInfo == en {
			tokens = append(tokens, tok)
		}
	}
	if len(tokens) != 1 || tokens[0].Account.DepositType != "amount" || tokens[0].Account.DepositValue != "25" ||
		tokens[0].Account.RoutingNumber == "" || tokens[0].Account.AccountNumber == "" || tokens[0].ClientName == "" {
		t.Fatalf("bridge tokens for %s: %+v", en, tokens)
	}
	for _, r := range truvAPI.Requests() {
		if r.Header.Get("X-Access-Client-Id") != "truv-client" || r.Header.Get("X-Access-Secret") != "truv-secret" {
			t.Errorf("%s %s without the service's credentials", r.Method, r.Path)
		}
		if strings.Contains(string(r.Body), "2025550") {
			t.Errorf("a donor's phone went to Truv: %s %s", r.Path, r.Body)
		}
	}

	// The church's deposit account the switch targets is its account
	// number at Increase; a credit to it from the bank is reconciled and
	// announced.
	if numbers := bank.AccountNumbers(); len(numbers) != 1 || numbers[0].AccountNumber != tokens[0].Account.AccountNumber ||
		numbers[0].RoutingNumber != tokens[0].Account.RoutingNumber {
		t.Fatalf("the switch's account %+v; account numbers at Increase %+v", tokens[0].Account, numbers)
	}
	transfer := bank.credit(t, ts, church, 2500)
	if deposit := waitDelivered(t, rc, "deposit.received", 1)[0]; !strings.Contains(string(deposit.Body), transfer.TraceNumber) {
		t.Fatalf("deposit.received: %s", deposit.Body)
	}

	// A webhook signed with another secret is refused, logged, and moves
	// nothing.
	forged, err := truv.BuildEvent(truv.Event{Type: truv.SwitchReverted, Reference: en, UserID: truv.NewID(), LinkID: truv.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := sendTruv(t, ts, "not-the-secret", forged); code != http.StatusUnauthorized {
		t.Fatalf("a forged Truv webhook: %d, want 401", code)
	}
	if got := getEnrollment(t, c, en); got.Status != "active" {
		t.Fatalf("a forged webhook moved the enrollment: %+v", got)
	}
	if !strings.Contains(ts.Logs.String(), `"result":"invalid_signature"`) {
		t.Fatal("the forged webhook was not logged")
	}
}

// payrollFailures counts the payroll failures the session recorded.
func payrollFailures(t *testing.T, ts *testStack, sessionID string) int {
	t.Helper()
	n := 0
	for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.payroll_failed") {
		if ev.AggregateID == sessionID {
			n++
		}
	}
	return n
}
