package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// enrollmentBody is an enrollment as the API answers it.
type enrollmentBody struct {
	EnrollmentID        string   `json:"enrollment_id"`
	Status              string   `json:"status"`
	Mode                string   `json:"mode"`
	Value               float64  `json:"value"`
	ActivatedAt         *string  `json:"activated_at"`
	PausedAt            *string  `json:"paused_at"`
	CanceledAt          *string  `json:"canceled_at"`
	CancelReason        *string  `json:"cancel_reason"`
	EndedAt             *string  `json:"ended_at"`
	EndReason           *string  `json:"end_reason"`
	PendingUpdate       *pending `json:"pending_update"`
	ConsentURL          string   `json:"consent_url"`
	ConsentURLExpiresAt string   `json:"consent_url_expires_at"`
}

type pending struct {
	Value               float64 `json:"value"`
	ConsentURLExpiresAt string  `json:"consent_url_expires_at"`
}

// move posts one enrollment move and fails the test unless it answers
// status; it returns the answer.
func move(t *testing.T, c *apitest.Client, id, action string, body any, status int) (*apitest.Response, enrollmentBody) {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/enrollments/"+id+"/"+action, body, nil)
	if resp.Status != status {
		t.Fatalf("%s %s: %d %s, want %d", action, id, resp.Status, resp.Body, status)
	}
	var e enrollmentBody
	if status == http.StatusOK {
		resp.JSON(t, &e)
	}
	return resp, e
}

// refused posts a move the enrollment's status does not allow and checks
// the 409 names the status.
func refused(t *testing.T, c *apitest.Client, id, action string, body any, status string) {
	t.Helper()
	resp, _ := move(t, c, id, action, body, http.StatusConflict)
	p := checkProblem(t, resp, http.StatusConflict, "invalid-transition")
	if !strings.Contains(p["detail"].(string), " is "+status+" ") {
		t.Fatalf("%s on a %s enrollment: the detail %q does not name the status", action, status, p["detail"])
	}
}

// simulate calls a sandbox simulator and returns the edge's status code.
func simulate(t *testing.T, c *apitest.Client, name string, body map[string]string) int {
	t.Helper()
	resp := c.Do(http.MethodPost, "/sandbox/simulate/"+name, body, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("simulate %s: %d %s", name, resp.Status, resp.Body)
	}
	var out struct {
		StatusCode int `json:"status_code"`
	}
	resp.JSON(t, &out)
	return out.StatusCode
}

func getEnrollment(t *testing.T, c *apitest.Client, id string) enrollmentBody {
	t.Helper()
	var e enrollmentBody
	c.Do(http.MethodGet, "/v1/enrollments/"+id, nil, nil).JSON(t, &e)
	return e
}

// The whole life of an enrollment, driven through the API, the simulators
// and the donor's hosted flow: each move's event arrives on a real webhook
// receiver and is the feed's item and GET /v1/events/{event_id}'s answer
// byte for byte; a repeated move answers 200 and appends nothing; a move
// the status does not allow is a 409 naming the status.
func TestEnrollmentLifecycle(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, pid := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	w := watchEvents(t, ts, c, pid)

	sess, en, _ := enrollByFlow(t, c, church, "pct", "3", nil)
	w.expect(t, "enrollment.created", en)
	if got := getEnrollment(t, c, en); got.Status != "pending" || got.Value != 3 {
		t.Fatalf("created: %+v", got)
	}
	refused(t, c, en, "pause", nil, "pending")
	refused(t, c, en, "resume", nil, "pending")
	if code := simulate(t, c, "payroll-connected", map[string]string{"enrollment_id": en, "church_id": church}); code != http.StatusOK {
		t.Fatalf("payroll-connected: edge answered %d", code)
	}
	w.expect(t, "enrollment.activated", en)

	t.Run("pause and resume", func(t *testing.T) {
		if _, e := move(t, c, en, "pause", nil, http.StatusOK); e.Status != "paused" || e.PausedAt == nil {
			t.Fatalf("paused: %+v", e)
		}
		if p := w.expect(t, "enrollment.paused", en); !reflect.DeepEqual(p, map[string]any{"enrollment_id": en}) {
			t.Fatalf("paused payload %v", p)
		}
		n := w.appended(t, en)
		if _, e := move(t, c, en, "pause", `{}`, http.StatusOK); e.Status != "paused" {
			t.Fatalf("paused again: %+v", e)
		}
		if w.appended(t, en) != n {
			t.Fatal("a repeated pause appended an event")
		}
		// The same Idempotency-Key replays the first answer.
		key := apitest.Header{"Idempotency-Key": "resume-" + en}
		first := c.Do(http.MethodPost, "/v1/enrollments/"+en+"/resume", nil, key)
		again := c.Do(http.MethodPost, "/v1/enrollments/"+en+"/resume", nil, key)
		if first.Status != 200 || again.Status != 200 || !bytes.Equal(first.Body, again.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("resume and its replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
		}
		w.expect(t, "enrollment.resumed", en)
		n = w.appended(t, en)
		if _, e := move(t, c, en, "resume", nil, http.StatusOK); e.Status != "active" || e.PausedAt != nil {
			t.Fatalf("resumed again: %+v", e)
		}
		if w.appended(t, en) != n {
			t.Fatal("a resume of an active enrollment appended an event")
		}
		// A body these moves do not take is refused.
		resp, _ := move(t, c, en, "pause", `{"reason":"x"}`, http.StatusUnprocessableEntity)
		checkProblem(t, resp, http.StatusUnprocessableEntity, "validation-error")
	})

	t.Run("lower value applies at once", func(t *testing.T) {
		for _, bad := range []string{`{"value":101}`, `{"value":0}`, `{"value":"2"}`, `{}`, `{"value":2.001}`} {
			resp, _ := move(t, c, en, "update", bad, http.StatusUnprocessableEntity)
			if f := fieldErrors(t, checkProblem(t, resp, http.StatusUnprocessableEntity, "validation-error")); f["value"] == "" {
				t.Fatalf("%s: no error for value: %v", bad, f)
			}
		}
		if _, e := move(t, c, en, "update", map[string]any{"value": 2}, http.StatusOK); e.Value != 2 || e.Status != "active" || e.PendingUpdate != nil || e.ConsentURL != "" {
			t.Fatalf("lowered: %+v", e)
		}
		if p := w.expect(t, "enrollment.updated", en); p["value"] != 2.0 {
			t.Fatalf("updated payload %v", p)
		}
		n := w.appended(t, en)
		if _, e := move(t, c, en, "update", `{"value":2.00}`, http.StatusOK); e.Value != 2 {
			t.Fatalf("same value: %+v", e)
		}
		if w.appended(t, en) != n {
			t.Fatal("updating to the same value appended an event")
		}
	})

	t.Run("raise waits for the donor's consent", func(t *testing.T) {
		n := w.appended(t, en)
		before := time.Now()
		_, e := move(t, c, en, "update", map[string]any{"value": 4.5}, http.StatusOK)
		if e.Status != "pending_consent" || e.Value != 2 || e.PendingUpdate == nil || e.PendingUpdate.Value != 4.5 {
			t.Fatalf("raised: %+v", e)
		}
		if !strings.HasPrefix(e.ConsentURL, ts.URL+"/flow/") || e.ConsentURLExpiresAt != e.PendingUpdate.ConsentURLExpiresAt {
			t.Fatalf("consent url %q expiring %q", e.ConsentURL, e.ConsentURLExpiresAt)
		}
		expires, _ := time.Parse(domain.TimeLayout, e.ConsentURLExpiresAt)
		if d := expires.Sub(before); d < domain.SessionLifetime-time.Minute || d > domain.SessionLifetime+time.Minute {
			t.Fatalf("the consent url lives %v", d)
		}
		// The url is shown once: reads do not carry it.
		if got := getEnrollment(t, c, en); got.ConsentURL != "" || got.Status != "pending_consent" {
			t.Fatalf("read while waiting: %+v", got)
		}
		// Only a cancel is allowed while the donor's consent is pending,
		// and the payroll side's word waits for it too.
		refused(t, c, en, "pause", nil, "pending_consent")
		refused(t, c, en, "resume", nil, "pending_consent")
		refused(t, c, en, "update", `{"value":9}`, "pending_consent")
		refused(t, c, en, "update", `{"value":1}`, "pending_consent")
		if code := simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "deposit_switch_reverted"}); code != http.StatusConflict {
			t.Fatalf("payroll-ended while pending_consent: edge answered %d, want 409", code)
		}
		if w.appended(t, en) != n+1 {
			t.Fatalf("%d events appended while waiting, want the request only", w.appended(t, en)-n)
		}
		// The donor consents in the hosted flow, to the new amount.
		d := newDonorBrowser(t, e.ConsentURL, nil)
		d.open("").expect(t, http.StatusOK, "Confirm it's you")
		checkFlowHeaders(t, d.page)
		d.submit("code", nil)
		page := d.submit("verify", map[string][]string{"code": {"000000"}})
		page.expect(t, http.StatusOK, "Agree to give")
		if !strings.Contains(page.Body, "from <strong>2% of each paycheck</strong> to <strong>4.5% of each paycheck</strong>") ||
			!strings.Contains(page.Body, "deduct 4.5% of each paycheck") {
			t.Fatalf("the consent screen does not show the change:\n%s", page.Body)
		}
		d.submit("consent", map[string][]string{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}).expect(t, http.StatusOK, "Your new amount is set")
		if p := w.expect(t, "enrollment.updated", en); p["value"] != 4.5 {
			t.Fatalf("updated payload %v", p)
		}
		if got := getEnrollment(t, c, en); got.Status != "active" || got.Value != 4.5 || got.PendingUpdate != nil {
			t.Fatalf("after consent: %+v", got)
		}
		// The link is bound to the donor's browser, and used up.
		newDonorBrowser(t, e.ConsentURL, nil).open("").expect(t, http.StatusForbidden, "This link was already used")
		d.open("").expect(t, http.StatusOK, "Your new amount is set")
	})

	t.Run("raise expires unused", func(t *testing.T) {
		if _, e := move(t, c, en, "pause", nil, http.StatusOK); e.Status != "paused" {
			t.Fatalf("pause: %+v", e)
		}
		w.expect(t, "enrollment.paused", en)
		_, e := move(t, c, en, "update", `{"value":6}`, http.StatusOK)
		if e.Status != "pending_consent" || e.ConsentURL == "" {
			t.Fatalf("raised: %+v", e)
		}
		d := newDonorBrowser(t, e.ConsentURL, nil)
		d.open("").expect(t, http.StatusOK, "Confirm it's you")
		clock.advance(domain.SessionLifetime + time.Second)
		w.expect(t, "enrollment.update_expired", en)
		got := getEnrollment(t, c, en)
		if got.Status != "paused" || got.Value != 4.5 || got.PendingUpdate != nil {
			t.Fatalf("after expiry: %+v", got)
		}
		page := d.open("")
		page.expect(t, http.StatusGone, "This link has expired")
		if !strings.Contains(page.Body, "stays at 4.5% of each paycheck") {
			t.Fatalf("expired consent page:\n%s", page.Body)
		}
		if n := countEvents(t, ts, "donor_session.expired"); n != 0 {
			t.Fatalf("%d donor_session.expired events for a consent url", n)
		}
		move(t, c, en, "resume", nil, http.StatusOK)
		w.expect(t, "enrollment.resumed", en)
	})

	t.Run("the payroll side ends it", func(t *testing.T) {
		for _, bad := range []map[string]string{
			{"enrollment_id": en, "church_id": church, "reason": "bored"},
			{"enrollment_id": en, "church_id": church},
		} {
			checkProblem(t, c.Do(http.MethodPost, "/sandbox/simulate/payroll-ended", bad, nil), http.StatusUnprocessableEntity, "validation-error")
		}
		// The payroll vendor reports no end of employment: left_employer
		// cannot be simulated, and nothing is sent.
		checkProblem(t, c.Do(http.MethodPost, "/sandbox/simulate/payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "left_employer"}, nil), http.StatusUnprocessableEntity, "validation-error")
		if code := simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "deposit_switch_reverted"}); code != http.StatusOK {
			t.Fatalf("payroll-ended: edge answered %d", code)
		}
		if p := w.expect(t, "enrollment.ended", en); !reflect.DeepEqual(p, map[string]any{"enrollment_id": en, "reason_code": "deposit_switch_reverted"}) {
			t.Fatalf("ended payload %v", p)
		}
		got := getEnrollment(t, c, en)
		if got.Status != "ended" || got.EndedAt == nil || got.EndReason == nil || *got.EndReason != "deposit_switch_reverted" {
			t.Fatalf("ended: %+v", got)
		}
		n := w.appended(t, en)
		if code := simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "deposit_switch_reverted"}); code != http.StatusOK {
			t.Fatalf("a repeated end: edge answered %d", code)
		}
		if w.appended(t, en) != n {
			t.Fatal("a repeated end appended an event")
		}
		for _, action := range []string{"cancel", "pause", "resume"} {
			refused(t, c, en, action, nil, "ended")
		}
		refused(t, c, en, "update", `{"value":1}`, "ended")
		// The donor's link says so, in any browser, with no form.
		page := newDonorBrowser(t, sess.URL, nil).open("")
		page.expect(t, http.StatusOK, "Your giving has ended")
		if strings.Contains(page.Body, "<form") || !strings.Contains(page.Body, "deduction was switched off") {
			t.Fatalf("ended page:\n%s", page.Body)
		}
		checkFlowHeaders(t, page)
	})

	t.Run("cancel", func(t *testing.T) {
		sess2, en2, donor := enrollByFlow(t, c, church, "fixed", "25", nil)
		w.expect(t, "enrollment.created", en2)
		long := strings.Repeat("x", domain.MaxCancelReason+1)
		resp, _ := move(t, c, en2, "cancel", map[string]string{"reason": long}, http.StatusUnprocessableEntity)
		if f := fieldErrors(t, checkProblem(t, resp, http.StatusUnprocessableEntity, "validation-error")); f["reason"] == "" {
			t.Fatalf("a long reason: %v", f)
		}
		reason := "The donor asked us to stop: moving to another parish."
		_, e := move(t, c, en2, "cancel", map[string]string{"reason": reason}, http.StatusOK)
		if e.Status != "canceled" || e.CanceledAt == nil || e.CancelReason == nil || *e.CancelReason != reason {
			t.Fatalf("canceled: %+v", e)
		}
		if p := w.expect(t, "enrollment.canceled", en2); !reflect.DeepEqual(p, map[string]any{"enrollment_id": en2, "reason_code": "partner_request"}) {
			t.Fatalf("canceled payload %v", p)
		}
		n := w.appended(t, en2)
		if _, e := move(t, c, en2, "cancel", map[string]string{"reason": "another reason"}, http.StatusOK); e.Status != "canceled" || *e.CancelReason != reason {
			t.Fatalf("canceled again: %+v", e)
		}
		if w.appended(t, en2) != n {
			t.Fatal("a repeated cancel appended an event")
		}
		for _, action := range []string{"pause", "resume"} {
			refused(t, c, en2, action, nil, "canceled")
		}
		refused(t, c, en2, "update", `{"value":30}`, "canceled")
		if code := simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en2, "church_id": church, "reason": "deposit_switch_reverted"}); code != http.StatusConflict {
			t.Fatalf("payroll-ended on a canceled enrollment: edge answered %d", code)
		}
		// The donor's own browser and any other see the canceled page.
		donor.open("").expect(t, http.StatusOK, "Your giving was canceled")
		page := newDonorBrowser(t, sess2.URL, nil).open("")
		page.expect(t, http.StatusOK, "Your giving was canceled")
		if strings.Contains(page.Body, "<form") || !strings.Contains(page.Body, "$25.00 from each paycheck") {
			t.Fatalf("canceled page:\n%s", page.Body)
		}
		// The reason survives a replay of the projections, and was never
		// stored in plain text.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ts.Projector.Rebuild(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := getEnrollment(t, c, en2); got.CancelReason == nil || *got.CancelReason != reason {
			t.Fatalf("after a rebuild: %+v", got)
		}
		if hit := grepDir(t, ts.Dir, "another parish"); hit != "" {
			t.Fatalf("the reason is stored in plain text in %s", hit)
		}
		// A pending consent can be canceled; its link then says so.
		_, en3, _ := enrollByFlow(t, c, church, "pct", "1", nil)
		_, e = move(t, c, en3, "update", `{"value":2}`, http.StatusOK)
		consent := newDonorBrowser(t, e.ConsentURL, nil)
		consent.open("").expect(t, http.StatusOK, "Confirm it's you")
		if _, e := move(t, c, en3, "cancel", nil, http.StatusOK); e.Status != "canceled" || e.PendingUpdate != nil || e.CancelReason != nil {
			t.Fatalf("canceled while waiting: %+v", e)
		}
		w.expect(t, "enrollment.canceled", en3)
		consent.open("").expect(t, http.StatusOK, "Your giving was canceled")
	})

	t.Run("a forgotten donor cannot consent to more", func(t *testing.T) {
		_, en4, _ := enrollByFlow(t, c, church, "pct", "3", nil)
		var e struct {
			DonorID string `json:"donor_id"`
		}
		c.Do(http.MethodGet, "/v1/enrollments/"+en4, nil, nil).JSON(t, &e)
		if _, err := ts.Operators.ForgetDonor(context.Background(), ts.Secrets, e.DonorID, ""); err != nil {
			t.Fatal(err)
		}
		resp, _ := move(t, c, en4, "update", `{"value":4}`, http.StatusConflict)
		if p := checkProblem(t, resp, http.StatusConflict, "conflict"); !strings.Contains(p["detail"].(string), "erased") {
			t.Fatalf("raise for a forgotten donor: %v", p)
		}
		if _, got := move(t, c, en4, "update", `{"value":2}`, http.StatusOK); got.Value != 2 || got.Status != "pending" {
			t.Fatalf("a lower value for a forgotten donor: %+v", got)
		}
	})

	if got := freshReplay(t, ts); !reflect.DeepEqual(got, dumpStore(t, ts.Store)) {
		t.Fatal("a fresh replay of the ledger differs from the live projections")
	}
}

// The list shows every status and filters by each.
func TestEnrollmentListFiltersEveryStatus(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	byStatus := map[string]string{}
	for _, st := range domain.EnrollmentStatuses {
		_, en, _ := enrollByFlow(t, c, church, "pct", "3", nil)
		byStatus[string(st)] = en
		if st != domain.EnrollmentPending && st != domain.EnrollmentPendingConsent {
			simulate(t, c, "payroll-connected", map[string]string{"enrollment_id": en, "church_id": church})
		}
		switch st {
		case domain.EnrollmentPaused:
			move(t, c, en, "pause", nil, http.StatusOK)
		case domain.EnrollmentPendingConsent:
			move(t, c, en, "update", `{"value":5}`, http.StatusOK)
		case domain.EnrollmentCanceled:
			move(t, c, en, "cancel", nil, http.StatusOK)
		case domain.EnrollmentEnded:
			simulate(t, c, "payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "deposit_switch_reverted"})
		}
	}
	var all struct {
		Data []enrollmentBody `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/enrollments", nil, nil).JSON(t, &all)
	if len(all.Data) != len(domain.EnrollmentStatuses) {
		t.Fatalf("%d enrollments listed", len(all.Data))
	}
	for st, en := range byStatus {
		var page struct {
			Data []enrollmentBody `json:"data"`
		}
		c.Do(http.MethodGet, "/v1/enrollments?status="+st+"&church_id="+church, nil, nil).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].EnrollmentID != en || page.Data[0].Status != st {
			t.Fatalf("status=%s lists %+v, want %s", st, page.Data, en)
		}
	}
	resp := c.Do(http.MethodGet, "/v1/enrollments?status=gone", nil, nil)
	if f := fieldErrors(t, checkProblem(t, resp, http.StatusUnprocessableEntity, "validation-error")); !strings.Contains(f["status"], "pending_consent") {
		t.Fatalf("bad status: %v", f)
	}
}

// Another partner's enrollment and events are the same 404 as ones that do
// not exist, for every read and every move, and a move attempted on them
// changes nothing.
func TestEnrollmentsAndEventsArePartnerIsolated(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, pid := ts.partner(t, "https://partner.example")
	b, _ := ts.partner(t, "https://partner.example")
	church := importChurch(t, a, "Grace Chapel")
	w := watchEvents(t, ts, a, pid)
	_, en, _ := enrollByFlow(t, a, church, "pct", "3", nil)
	w.expect(t, "enrollment.created", en)
	simulate(t, a, "payroll-connected", map[string]string{"enrollment_id": en, "church_id": church})
	w.expect(t, "enrollment.activated", en)
	n := w.appended(t, en)
	evID := w.hooks.deliveries()[0].EventID
	missing := domain.NewID(domain.PrefixEnrollment)

	for _, id := range []string{en, missing, "en_nope", "x.y"} {
		checkProblem(t, b.Do(http.MethodGet, "/v1/enrollments/"+id, nil, nil), http.StatusNotFound, "not-found")
		for action, body := range map[string]any{"cancel": nil, "pause": nil, "resume": nil, "update": `{"value":1}`} {
			checkProblem(t, b.Do(http.MethodPost, "/v1/enrollments/"+id+"/"+action, body, nil), http.StatusNotFound, "not-found")
		}
	}
	for _, id := range []string{evID, domain.NewID(domain.PrefixEvent), "evt_nope"} {
		checkProblem(t, b.Do(http.MethodGet, "/v1/events/"+id, nil, nil), http.StatusNotFound, "not-found")
	}
	// An internal event's id is not an event partners can read.
	imported := ledgerEvents(t, ts.Ledger, "church.imported")
	checkProblem(t, a.Do(http.MethodGet, "/v1/events/"+imported[0].ID, nil, nil), http.StatusNotFound, "not-found")
	checkProblem(t, b.Do(http.MethodPost, "/sandbox/simulate/payroll-ended", map[string]string{"enrollment_id": en, "church_id": church, "reason": "left_employer"}, nil), http.StatusNotFound, "not-found")
	if w.appended(t, en) != n {
		t.Fatal("another partner's moves changed the enrollment")
	}
	if got := getEnrollment(t, a, en); got.Status != "active" {
		t.Fatalf("after B's attempts: %+v", got)
	}
}

// A donor session's every outcome is an event: a failed identity check and
// a lockout arrive on the webhook and the feed like a success does.
func TestDonorSessionOutcomesAreEvents(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	w := watchEvents(t, ts, c, pid)

	declined := openSession(t, c, church, "+12025550102", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, declined.URL, nil)
	verifiedDonor(t, d)
	d.page.expect(t, http.StatusOK, "We couldn't verify your identity")
	if p := w.expect(t, "donor_session.declined", declined.ID); !reflect.DeepEqual(p, map[string]any{"donor_session_id": declined.ID}) {
		t.Fatalf("declined payload %v", p)
	}
	waitSessionStatus(t, c, declined.ID, "declined")

	locked := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, locked.URL, nil)
	d.open("")
	d.submit("code", nil)
	for range domain.MaxCodeAttempts {
		d.submit("verify", map[string][]string{"code": {"999999"}})
	}
	d.page.expect(t, http.StatusOK, "Too many wrong codes")
	if p := w.expect(t, "donor_session.locked", locked.ID); !reflect.DeepEqual(p, map[string]any{"donor_session_id": locked.ID}) {
		t.Fatalf("locked payload %v", p)
	}
	if n := sessionEvents(t, ts.Ledger, locked.ID, "donor_session.locked"); n != 1 {
		t.Fatalf("%d lock events", n)
	}
}

// GET /v1/event_types lists every public type with the payload schema the
// OpenAPI document carries (the client checks the answer against it).
func TestEventTypesCatalogue(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	resp := c.Do(http.MethodGet, "/v1/event_types", nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("%d %s", resp.Status, resp.Body)
	}
	var got struct {
		Data []httpapi.EventType `json:"data"`
	}
	resp.JSON(t, &got)
	var types []string
	for i, et := range got.Data {
		types = append(types, et.Type)
		want := httpapi.EventTypes()[i]
		if et.Type != want.Type || et.Summary != want.Summary || !jsonEqual(t, et.PayloadSchema, want.PayloadSchema) {
			t.Fatalf("entry %d: %+v, want %+v", i, et, want)
		}
	}
	if !reflect.DeepEqual(types, domain.PublicEventTypes()) {
		t.Fatalf("types %v, want %v", types, domain.PublicEventTypes())
	}
	for _, want := range []string{"enrollment.canceled", "enrollment.paused", "enrollment.resumed", "enrollment.updated",
		"enrollment.update_expired", "enrollment.ended", "donor_session.declined", "donor_session.locked"} {
		if !contains(types, want) {
			t.Errorf("%s is not listed", want)
		}
	}
	// Without a key, the same 401 as everywhere.
	c.Key = ""
	checkProblem(t, c.Do(http.MethodGet, "/v1/event_types", nil, nil), http.StatusUnauthorized, "unauthorized")
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
