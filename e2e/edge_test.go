package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

// enroll drives a donor session through every flow decision with the
// command helper, as the hosted flow would, and returns the enrollment id.
func enroll(t *testing.T, ts *testStack, c *apitest.Client, partnerID, church, phone string) (sessionID, enrollmentID string) {
	t.Helper()
	final := completeSession(t, ts, c, partnerID, church, phone)
	if _, err := ts.Ledger.Execute(context.Background(), eventlog.Command{
		Partner: partnerID, Aggregate: final.EnrollmentID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			var e domain.Enrollment
			ev, err := domain.CreateEnrollment(&e, final.EnrollmentFor(), time.Now())
			return &ev, err
		},
	}); err != nil {
		t.Fatalf("create enrollment: %v", err)
	}
	ts.waitProjected(t)
	return final.ID, final.EnrollmentID
}

// completeSession drives a new donor session through every flow decision up
// to its completion, and returns it: the enrollment it names is not created.
func completeSession(t *testing.T, ts *testStack, c *apitest.Client, partnerID, church, phone string) domain.Session {
	t.Helper()
	var s sessionResponse
	c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, phone, "pct", "3", "https://partner.example/"), nil).JSON(t, &s)
	steps := []func(cur *domain.Session, now time.Time) (*domain.Event, error){
		func(cur *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.Bind(cur, "", "browser", now)
		},
		domain.SendCode,
		func(cur *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.CheckCode(cur, true, now)
		},
		func(cur *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.Consent(cur, domain.ConsentTerms{Church: "Grace", Partner: "Acme"}, "", now)
		},
		func(cur *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.DecideKYC(cur, domain.KYCPassed, "test", now)
		},
		func(cur *domain.Session, now time.Time) (*domain.Event, error) {
			return domain.StartSwitch(cur, domain.NewID(domain.PrefixEnrollment), "", now)
		},
		domain.CompleteSession,
	}
	var final domain.Session
	for _, step := range steps {
		_, err := ts.Ledger.Execute(context.Background(), eventlog.Command{
			Partner: partnerID, Aggregate: s.ID,
			Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
				var cur domain.Session
				for _, e := range h.Events {
					cur.Apply(e)
				}
				ev, err := step(&cur, time.Now())
				if ev != nil {
					cur.Apply(*ev)
				}
				final = cur
				return ev, err
			},
		})
		if err != nil {
			t.Fatalf("flow step: %v", err)
		}
	}
	return final
}

// countEvents counts the ledger's events of one type.
func countEvents(t *testing.T, ts *testStack, eventType string) int {
	t.Helper()
	recs, _, err := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().OfType(eventType), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

func TestSimulatorsGoThroughTheEdge(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	other, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	foreign := importChurch(t, other, "Theirs")
	_, en := enroll(t, ts, c, pid, church, "+12025550100")

	// Unknown enrollment: the edge's 4xx surfaces as is, nothing appended.
	before := ts.lastSeq(t)
	resp := c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", `{"enrollment_id":"en_2pQm3s8JmYc5B9vXk0QeLr1nD7a","church_id":"`+church+`"}`, nil)
	if p, _ := resp.Map(t)["problem"].(map[string]any); resp.Status != http.StatusOK || resp.Map(t)["status_code"].(float64) != 422 || p["type"] != "/problems/unknown-reference" {
		t.Fatalf("unknown enrollment: %d %s", resp.Status, resp.Body)
	}
	if ts.lastSeq(t) != before {
		t.Fatal("a rejected simulation appended to the ledger")
	}
	// A church of another partner: 404, and nothing is sent.
	if r := c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", `{"enrollment_id":"`+en+`","church_id":"`+foreign+`"}`, nil); r.Status != http.StatusNotFound {
		t.Fatalf("foreign church: %d %s", r.Status, r.Body)
	}
	resp = c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", `{"enrollment_id":"`+en+`","church_id":"`+church+`"}`, nil)
	if resp.Status != http.StatusOK || string(resp.Body) != `{"status_code":200}` {
		t.Fatalf("payroll-connected: %d %s", resp.Status, resp.Body)
	}
	if countEvents(t, ts, "enrollment.activated") != 1 {
		t.Fatal("no enrollment.activated")
	}

	// Deposit: answers the spec's shape; trace generated when omitted.
	resp = c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":10.10}`, nil)
	var dep struct {
		StatusCode int `json:"status_code"`
		Simulated  struct {
			EventType string `json:"event_type"`
			Trace     string `json:"trace"`
			BankTS    string `json:"bank_ts"`
		} `json:"simulated"`
	}
	resp.JSON(t, &dep)
	if dep.StatusCode != 200 || dep.Simulated.EventType != "ach.credit.received" || dep.Simulated.Trace == "" {
		t.Fatalf("deposit: %s", resp.Body)
	}
	if _, err := time.Parse(domain.TimeLayout, dep.Simulated.BankTS); err != nil {
		t.Fatalf("bank_ts %q: %v", dep.Simulated.BankTS, err)
	}
	// The same trace again: acknowledged, never credited twice.
	resp = c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":10.10,"trace":"`+dep.Simulated.Trace+`"}`, nil)
	if resp.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("repeated trace: %s", resp.Body)
	}
	if n := countEvents(t, ts, "deposit.received"); n != 1 {
		t.Fatalf("%d deposit.received, want 1", n)
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	bal, err := ts.Store.ChurchBalance(pid, church)
	if err != nil || bal.Total != 1010 || bal.Count != 1 || bal.Accounts["acct_1"] != 1010 {
		t.Fatalf("balance %+v %v", bal, err)
	}
	recs, _, _ := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().OfType("deposit.received"), 0, 10)
	if bytes.Contains(recs[0].Data, []byte("acct_1")) {
		t.Fatal("deposit.received exposes the account reference")
	}
	var env struct {
		ChurchID string `json:"church_id"`
		Payload  map[string]json.RawMessage
	}
	_ = json.Unmarshal(recs[0].Data, &env)
	if env.ChurchID != church || string(env.Payload["amount"]) != "10.10" || string(env.Payload["currency"]) != `"USD"` || len(env.Payload) != 5 {
		t.Fatalf("deposit.received: %s", recs[0].Data)
	}

	// Missing fields: the simulator's own 422, nothing sent.
	if r := c.Do(http.MethodPost, "/sandbox/simulate/kyc", `{"church_id":"`+church+`"}`, nil); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("kyc without donor: %d", r.Status)
	}
}

func TestDepositAmounts(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	// Each amount in dollars, as the partner sends the simulator, and in
	// cents, as a bank's transfer carries it.
	cases := []struct {
		amount, cents string
		ok            bool
	}{
		{"10.10", "1010", true}, {"10.1", "1010", true}, {"7", "700", true}, {"0.01", "1", true},
		{"10.101", "1010.1", false}, {"0", "0", false}, {"-1", "-100", false}, {`"10"`, `"10"`, false}, {"1e400", "1e400", false},
		{"1E2", "1E2", false}, {"0.001", "0.1", false}, {"null", "null", false}, {"true", "true", false},
	}
	for i, tc := range cases {
		t.Run(tc.amount, func(t *testing.T) {
			c.TB = t
			before := ts.lastSeq(t)
			trace := "sim-" + domain.NewID("")
			// Through the simulator.
			resp := c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct","amount":`+tc.amount+`,"trace":"`+trace+`"}`, nil)
			code := resp.Status // the simulator's own refusal of a missing amount
			if resp.Status == http.StatusOK {
				code = int(resp.Map(t)["status_code"].(float64))
			}
			// Straight at the edge, as Increase sends it, with a valid
			// signature.
			direct, _ := sendBank(t, ts, ts.API.VendorSecrets().Bank, fmt.Sprintf("event_amount_%d", i),
				increasesandbox.Deposit{ChurchID: church, AccountRef: "acct", Trace: "d" + trace, Amount: tc.cents})
			if tc.ok && (code != 200 || direct != 200) {
				t.Fatalf("amount %s refused: simulator %d, edge %d", tc.amount, code, direct)
			}
			if !tc.ok {
				if code < 400 || code >= 500 || direct < 400 || direct >= 500 {
					t.Fatalf("amount %s: simulator %d, edge %d; want 4xx", tc.amount, code, direct)
				}
				if ts.lastSeq(t) != before {
					t.Fatal("a refused amount appended to the ledger")
				}
			}
		})
	}
	c.TB = t
	// NaN is not JSON at all: a 400 at the edge, never a 5xx.
	code, _ := postBank(t, ts, ts.API.VendorSecrets().Bank, "event_nan", []byte(`{"id":"event_nan","type":"event","amount":NaN}`))
	if code != http.StatusBadRequest {
		t.Fatalf("NaN: %d", code)
	}
}

func TestSandboxIsAbsentInProduction(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withEnv(domain.Production))
	c, _ := ts.partner(t)
	for _, p := range []string{"/sandbox/simulate/deposit", "/sandbox/simulate/kyc", "/sandbox/simulate/payroll-connected", "/sandbox/anything"} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+p, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+c.Key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s on production: %d", p, resp.StatusCode)
		}
	}
}

func TestKYCOutcomesMoveTheFlow(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	toKYC := func(phone string) sessionResponse {
		var s sessionResponse
		c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, phone, "pct", "3", "https://partner.example/"), nil).JSON(t, &s)
		for _, step := range []func(cur *domain.Session, now time.Time) (*domain.Event, error){
			func(cur *domain.Session, now time.Time) (*domain.Event, error) { return domain.Bind(cur, "", "b", now) },
			domain.SendCode,
			func(cur *domain.Session, now time.Time) (*domain.Event, error) {
				return domain.CheckCode(cur, true, now)
			},
			func(cur *domain.Session, now time.Time) (*domain.Event, error) {
				return domain.Consent(cur, domain.ConsentTerms{Church: "Grace", Partner: "Acme"}, "", now)
			},
		} {
			if _, err := ts.Ledger.Execute(context.Background(), eventlog.Command{Partner: pid, Aggregate: s.ID,
				Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
					var cur domain.Session
					for _, e := range h.Events {
						cur.Apply(e)
					}
					return step(&cur, time.Now())
				}}); err != nil {
				t.Fatal(err)
			}
		}
		ts.waitProjected(t)
		return s
	}
	step := func(id string) domain.FlowStep {
		s, _, _ := ts.Store.Session(pid, id)
		return s.Step(time.Now())
	}
	kyc := func(donor, outcome string) *apitest.Response {
		return c.Do(http.MethodPost, "/sandbox/simulate/kyc", `{"church_id":"`+church+`","donor_id":"`+donor+`","outcome":"`+outcome+`"}`, nil)
	}
	a := toKYC("+442079460000")
	if step(a.ID) != domain.StepKYC {
		t.Fatalf("not waiting for KYC: %s", step(a.ID))
	}
	if r := kyc(a.DonorID, "review"); string(r.Body) != `{"status_code":200,"simulated":"review"}` {
		t.Fatalf("review: %s", r.Body)
	}
	if s, _, _ := ts.Store.Session(pid, a.ID); s.KYC != domain.KYCReview || step(a.ID) != domain.StepKYC {
		t.Fatalf("after review: kyc %q step %s", s.KYC, step(a.ID))
	}
	if r := c.Do(http.MethodPost, "/sandbox/simulate/kyc", `{"church_id":"`+church+`","donor_id":"`+a.DonorID+`"}`, nil); r.Map(t)["simulated"] != "passed" || r.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("default outcome: %s", r.Body)
	}
	if step(a.ID) != domain.StepPayroll {
		t.Fatalf("after passed: %s", step(a.ID))
	}
	b := toKYC("+4915112345678")
	kyc(b.DonorID, "failed")
	var got sessionResponse
	c.Do(http.MethodGet, "/v1/donor_sessions/"+b.ID, nil, nil).JSON(t, &got)
	if got.Status != "declined" || step(b.ID) != domain.StepDeclined {
		t.Fatalf("after failed: %s %s", got.Status, step(b.ID))
	}
	// Nobody waits any more: the edge's 409 surfaces with its problem body,
	// which says why; an unknown donor is 422, also with the reason.
	edgeProblem := func(r *apitest.Response, status float64, typ, detail string) {
		t.Helper()
		m := r.Map(t)
		p, _ := m["problem"].(map[string]any)
		if m["status_code"] != status || p == nil || p["type"] != typ || p["status"] != status || !strings.Contains(fmt.Sprint(p["detail"]), detail) {
			t.Fatalf("want the edge's %v %s problem saying %q: %s", status, typ, detail, r.Body)
		}
	}
	edgeProblem(kyc(b.DonorID, "passed"), 409, "/problems/conflict", "waiting for identity verification")
	edgeProblem(kyc("dn_2pQm3s8JmYc5B9vXk0QeLr1nD7a", "passed"), 422, "/problems/unknown-reference", "is not a donor of this church")
	// The first seed donor (docs/sandbox.md) is decided at once: never waiting.
	seed := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/done")
	edgeProblem(kyc(seed.DonorID, "review"), 409, "/problems/conflict", "waiting for identity verification")
}

// Deposits are deduplicated per partner by trace; a reused trace with other
// details is refused; an amount beyond one ACH entry is refused; a credit is
// one ledger message, the public deposit.received carrying the credit's
// account beside its envelope, never in it; and a credit a ledger written
// before recorded without its announcement (a failure part-way) is
// announced when the bank retries.
func TestDepositTracesAndRecovery(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, pa := ts.partner(t)
	b, pb := ts.partner(t)
	ca, cb := importChurch(t, a, "A"), importChurch(t, b, "B")
	deposit := func(c *apitest.Client, church, trace, amount string) int {
		resp := c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct","amount":`+amount+`,"trace":"`+trace+`"}`, nil)
		return int(resp.Map(t)["status_code"].(float64))
	}
	ctx := context.Background()
	first, err := ts.Ledger.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deposit(a, ca, "SHARED-1", "5.00") != 200 || deposit(b, cb, "SHARED-1", "7.00") != 200 {
		t.Fatal("the same trace at two partners must credit both")
	}
	recs, _, err := ts.Ledger.Read(ctx, ts.Ledger.Subjects().All(), first, 10)
	if err != nil || len(recs) != 2 {
		t.Fatalf("two credits stored %d messages (%v), want 2", len(recs), err)
	}
	for _, rec := range recs {
		if rec.Type != "deposit.received" || !rec.Public || bytes.Contains(rec.Data, []byte("acct")) || !bytes.Contains(rec.Internal, []byte(`"account_ref":"acct"`)) {
			t.Fatalf("credit stored as %s (public %v) %s, internal %s", rec.Type, rec.Public, rec.Data, rec.Internal)
		}
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, _ := ts.Store.ChurchBalance(pb, cb); bal.Total != 700 {
		t.Fatalf("partner B's balance %d, want 700", bal.Total)
	}
	if code := deposit(a, ca, "SHARED-1", "6.00"); code != http.StatusConflict {
		t.Fatalf("reused trace with another amount: %d, want 409", code)
	}
	if code := deposit(a, ca, "SHARED-1", "5.00"); code != http.StatusOK {
		t.Fatalf("the same credit again: %d", code)
	}
	if code := deposit(a, ca, "BIG-1", "100000000.00"); code != http.StatusUnprocessableEntity {
		t.Fatalf("an amount beyond one ACH entry: %d", code)
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, _ := ts.Store.ChurchBalance(pa, ca); bal.Total != 500 || bal.Count != 1 {
		t.Fatalf("partner A's balance %+v", bal)
	}

	// A credit whose announcement never happened, recorded as ledgers
	// written before did: an internal deposit.credited of its own.
	credited := domain.NewEvent(pa, domain.DepositIDForTrace("HALF-1"), ca, time.Now(), &domain.DepositCredited{
		Trace: "HALF-1", AccountRef: "acct", Amount: 1234, Currency: "USD", BankTS: domain.FormatTime(time.Now()),
	})
	if _, err := ts.Ledger.Append(ctx, credited, "", 0); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	before := countEvents(t, ts, "deposit.received")
	if code := deposit(a, ca, "HALF-1", "12.34"); code != http.StatusOK {
		t.Fatalf("the bank's retry: %d", code)
	}
	if countEvents(t, ts, "deposit.received") != before+1 {
		t.Fatal("the retry did not announce the recorded credit")
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, _ := ts.Store.ChurchBalance(pa, ca); bal.Total != 500+1234 || bal.Count != 2 {
		t.Fatalf("the retry credited twice: %+v", bal)
	}
	if code := deposit(a, ca, "HALF-1", "12.34"); code != http.StatusOK || countEvents(t, ts, "deposit.received") != before+1 {
		t.Fatalf("the bank's second retry: %d, announced again: %v", code, countEvents(t, ts, "deposit.received") != before+1)
	}
}

// A deposit simulation whose answer was lost (and, on a single node after a
// crash, its key's record with it) is retried with its key: the retry sends
// the same bank webhook (trace, event id, bank timestamp), the edge credits
// it once, and the retry answers what the first run did.
func TestRetriedDepositSimulationCreditsOnce(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withNATSListen("127.0.0.1:0"))
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	body := `{"church_id":"` + church + `","account_ref":"acct_1","amount":12.34}`
	key := apitest.Header{"Idempotency-Key": "deposit-lost-answer"}

	first := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, key)
	if first.Status != http.StatusOK || first.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	eventlogtest.LoseKeyRecord(t, ts.Ledger.ClientURL(), domain.Sandbox, pid, key["Idempotency-Key"])
	again := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, key)
	if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("retry after the record was lost: %d %s\nwant %s", again.Status, again.Body, first.Body)
	}
	if n := countEvents(t, ts, "deposit.received"); n != 1 {
		t.Fatalf("%d deposit.received for one key, want 1", n)
	}
	// Another key is another deposit; an explicit trace still wins.
	other := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, apitest.Header{"Idempotency-Key": "deposit-2"})
	if bytes.Equal(other.Body, first.Body) || countEvents(t, ts, "deposit.received") != 2 {
		t.Fatalf("another key: %s", other.Body)
	}
	own := c.Do(http.MethodPost, "/sandbox/simulate/deposit", strings.Replace(body, `"amount"`, `"trace":"trc_mine","amount"`, 1), apitest.Header{"Idempotency-Key": "deposit-3"})
	if !strings.Contains(string(own.Body), `"trace":"trc_mine"`) {
		t.Fatalf("explicit trace: %s", own.Body)
	}
}

// An earlier build recorded a credit and its announcement as two appends,
// under the vendor event's ids ":0" and ":1", and could stop between them.
// The bank's retry of that very event, inside the dedup window, announces
// the deposit once and credits nothing more.
func TestAnEarlierBuildsHalfDoneCreditIsAnnouncedOnTheBanksRetry(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	ctx := context.Background()
	credited := domain.NewEvent(pid, domain.DepositIDForTrace("HALF-X"), church, time.Now(), &domain.DepositCredited{
		Trace: "HALF-X", AccountRef: "acct", Amount: 1000, Currency: "USD", BankTS: "2026-11-21T10:00:00.000Z",
	})
	if _, err := ts.Ledger.Append(ctx, credited, "vendor:bank:event_bank_half:0", 0); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	before := countEvents(t, ts, "deposit.received")
	retry := increasesandbox.Deposit{ChurchID: church, AccountRef: "acct", Trace: "HALF-X", Amount: "1000", At: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	for i, want := range []string{"accepted", "duplicate"} {
		code, ack := sendBank(t, ts, ts.API.VendorSecrets().Bank, "event_bank_half", retry)
		if code != http.StatusOK || ack["status"] != want {
			t.Fatalf("retry %d: %d %v, want %s", i+1, code, ack, want)
		}
	}
	ts.waitProjected(t)
	if got := countEvents(t, ts, "deposit.received"); got != before+1 {
		t.Fatalf("%d deposit.received after the retries, want %d", got, before+1)
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, err := ts.Store.ChurchBalance(pid, church); err != nil || bal.Count != 1 || bal.Total != 1000 {
		t.Fatalf("balance %+v (%v): the retry credited again", bal, err)
	}
}

// A partner's deposits are one aggregate: bank deliveries of one trace
// arriving at once (each its own vendor event) credit it once, and distinct
// traces arriving at once are each credited.
func TestConcurrentCreditsOfATraceCreditOnce(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	creditConcurrently(t, pid, importChurch(t, c, "Grace"), ts)
}

// Two instances share one ledger: deliveries of one trace reaching both at
// once credit it once (the deposit book's guard, not one process's turns,
// decides), and distinct traces reaching both are each credited.
func TestCreditsOfATraceOnTwoInstancesCreditOnce(t *testing.T) {
	t.Parallel()
	natsURL := eventlogtest.StartServer(t)
	master := withMasterKey("6a1f2c9b8d7e6f50412233445566778899aabbccddeeff00112233445566778b")
	one := startStack(t, withNATSURL(natsURL), master)
	two := startStack(t, withNATSURL(natsURL), master)
	c, pid := one.partner(t)
	church := importChurch(t, c, "Grace")
	two.waitProjected(t)
	creditConcurrently(t, pid, church, one, two)
}

// creditConcurrently sends, all at once and spread over the instances, 12
// bank deliveries of one trace and 12 of distinct traces for the church,
// and checks that 13 credits of 10.00 were recorded.
func creditConcurrently(t *testing.T, pid, church string, stacks ...*testStack) {
	t.Helper()
	credit := func(ts *testStack, id, trace string) int {
		code, _ := sendBank(t, ts, ts.API.VendorSecrets().Bank, id, increasesandbox.Deposit{
			ChurchID: church, AccountRef: "acct", Trace: trace, Amount: "1000", At: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		})
		return code
	}
	const n = 12
	var wg sync.WaitGroup
	codes := make([]int, 2*n)
	for i := range n {
		ts := stacks[i%len(stacks)]
		wg.Go(func() { codes[i] = credit(ts, fmt.Sprintf("event_bank_same_%d", i), "SAME-TRACE") })
		wg.Go(func() { codes[n+i] = credit(ts, fmt.Sprintf("event_bank_own_%d", i), fmt.Sprintf("OWN-%d", i)) })
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Fatalf("delivery %d: %d", i, code)
		}
	}
	ts := stacks[0]
	ts.waitProjected(t)
	if got := countEvents(t, ts, "deposit.received"); got != n+1 {
		t.Fatalf("%d deposit.received, want %d (one for the shared trace, one per own trace)", got, n+1)
	}
	ts.waitProjected(t) // credits answer before the projector applies them
	if bal, err := ts.Store.ChurchBalance(pid, church); err != nil || bal.Count != n+1 || bal.Total != (n+1)*1000 {
		t.Fatalf("balance %+v (%v), want %d credits of 10.00", bal, err, n+1)
	}
}
