package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

const importPath = "/v1/churches/import"

func TestIdempotencyKeyIsCheckedBeforeAnyEffect(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	body := `{"churches":[{"name":"Grace Chapel"}]}`
	before := ts.lastSeq(t)

	checkProblem(t, c.Do(http.MethodPost, importPath, body, apitest.Header{"Idempotency-Key": ""}), 400, "idempotency-key-missing")
	for _, key := range []string{strings.Repeat("k", 256), "a b", "ключ", "tab\tkey", "é"} {
		checkProblem(t, c.Do(http.MethodPost, importPath, body, apitest.Header{"Idempotency-Key": key}), 400, "idempotency-key-invalid")
	}
	// An empty header, and the header twice, are not one valid key either.
	for _, values := range [][]string{{""}, {"k1", "k2"}} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+importPath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.Key)
		req.Header.Set("Content-Type", "application/json")
		req.Header["Idempotency-Key"] = values
		checkProblem(t, c.Send(req, []byte(body)), 400, "idempotency-key-invalid")
	}
	// The key is checked before the body: a bad key with a bad body is
	// still about the key.
	checkProblem(t, c.Do(http.MethodPost, importPath, "not json", apitest.Header{"Idempotency-Key": "a b"}), 400, "idempotency-key-invalid")

	if after := ts.lastSeq(t); after != before {
		t.Fatalf("refused requests appended events: %d → %d", before, after)
	}
	if n := len(imports(t, ts.Ledger, pid)); n != 0 {
		t.Fatalf("%d imports stored", n)
	}
	// 255 visible ASCII characters are fine.
	if r := c.Do(http.MethodPost, importPath, body, apitest.Header{"Idempotency-Key": strings.Repeat("~", 255)}); r.Status != 200 {
		t.Fatalf("255-char key: %d %s", r.Status, r.Body)
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	key := apitest.Header{"Idempotency-Key": "replay-1"}
	body := `{"churches":[{"name":"Grace Chapel","external_id":"crm-1"},{"name":""}]}`

	first := c.Do(http.MethodPost, importPath, body, key)
	if first.Status != 200 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d replayed=%q %s", first.Status, first.Header.Get("Idempotent-Replayed"), first.Body)
	}
	seq := ts.lastSeq(t)
	for range 3 {
		again := c.Do(http.MethodPost, importPath, body, key)
		if again.Status != 200 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d replayed=%q\n%s\nwant\n%s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body, first.Body)
		}
	}
	if after := ts.lastSeq(t); after != seq {
		t.Fatalf("replays appended events: %d → %d", seq, after)
	}
	if n := len(imports(t, ts.Ledger, pid)); n != 1 {
		t.Fatalf("%d imports, want 1", n)
	}

	// The same key for a different request is refused, and changes nothing.
	checkProblem(t, c.Do(http.MethodPost, importPath, `{"churches":[{"name":"Other"}]}`, key), 422, "idempotency-key-reused")
	checkProblem(t, c.Do(http.MethodPost, importPath, strings.Replace(body, "Grace", "Grace ", 1), key), 422, "idempotency-key-reused")
	if after := ts.lastSeq(t); after != seq {
		t.Fatalf("a reused key appended events: %d → %d", seq, after)
	}

	// A finished error answer is replayed too: the request did not change.
	bad := apitest.Header{"Idempotency-Key": "replay-bad"}
	r1 := checkProblem(t, c.Do(http.MethodPost, importPath, `{"churches":"x"}`, bad), 422, "validation-error")
	r2 := c.Do(http.MethodPost, importPath, `{"churches":"x"}`, bad)
	p2 := checkProblem(t, r2, 422, "validation-error")
	if r2.Header.Get("Idempotent-Replayed") != "true" || p2["request_id"] != r1["request_id"] {
		t.Fatalf("replayed error: %v %v (replayed=%q)", p2, r1, r2.Header.Get("Idempotent-Replayed"))
	}
}

func TestIdempotencyKeysArePartnerScoped(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, pa := ts.partner(t)
	b, pb := ts.partner(t)
	key := apitest.Header{"Idempotency-Key": "shared-key"}
	body := `{"churches":[{"name":"Same name","external_id":"same-ext"}]}`
	ra := a.Do(http.MethodPost, importPath, body, key)
	rb := b.Do(http.MethodPost, importPath, body, key)
	if ra.Status != 200 || rb.Status != 200 || rb.Header.Get("Idempotent-Replayed") != "" || bytes.Equal(ra.Body, rb.Body) {
		t.Fatalf("A: %d %s\nB: %d replayed=%q %s", ra.Status, ra.Body, rb.Status, rb.Header.Get("Idempotent-Replayed"), rb.Body)
	}
	var ia, ib importResponse
	ra.JSON(t, &ia)
	rb.JSON(t, &ib)
	if ia.Results[0].Status != "created" || ib.Results[0].Status != "created" || ia.Results[0].Church.ID == ib.Results[0].Church.ID {
		t.Fatalf("both partners should own a church: %s / %s", ra.Body, rb.Body)
	}
	if len(imports(t, ts.Ledger, pa)) != 1 || len(imports(t, ts.Ledger, pb)) != 1 {
		t.Fatal("want one import per partner")
	}
}

// Fifty requests race with one key: exactly one runs; the others get the
// stored answer or a 409 while it runs.
func TestConcurrentRequestsWithOneKeyImportOnce(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	sawInFlight := false
	// The largest import, so that it is still running when the others
	// arrive: requests got faster, and a small one could finish first.
	const races = 10
	for attempt := 0; attempt < races && !sawInFlight; attempt++ {
		key := apitest.Header{"Idempotency-Key": fmt.Sprintf("race-%d", attempt)}
		// A new key with the same external ids would reject every row;
		// each attempt has its own, so each creates churches.
		rows := make([]string, domain.MaxImportRows)
		for i := range rows {
			rows[i] = fmt.Sprintf(`{"name":"Church %d","external_id":"a%d-ext-%d"}`, i, attempt, i)
		}
		body := `{"churches":[` + strings.Join(rows, ",") + `]}`
		const n = 50
		resps := make([]*apitest.Response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resps[i] = c.Do(http.MethodPost, importPath, body, key)
			}()
		}
		close(start)
		wg.Wait()

		var original []byte
		fresh := 0
		for _, r := range resps {
			switch r.Status {
			case http.StatusOK:
				if r.Header.Get("Idempotent-Replayed") != "true" {
					fresh++
				}
				if original == nil {
					original = r.Body
				} else if !bytes.Equal(original, r.Body) {
					t.Fatalf("two different 200 answers for one key")
				}
			case http.StatusConflict:
				checkProblem(t, r, 409, "idempotency-key-in-use")
				if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
					t.Fatalf("409 Retry-After %q", r.Header.Get("Retry-After"))
				}
				sawInFlight = true
			default:
				t.Fatalf("unexpected answer %d: %s", r.Status, r.Body)
			}
		}
		if fresh > 1 {
			t.Fatalf("%d requests ran with one key", fresh)
		}
		// Once the first finishes, the key answers with its result.
		final := c.Do(http.MethodPost, importPath, body, key)
		if final.Status != 200 || (original != nil && !bytes.Equal(final.Body, original)) {
			t.Fatalf("after the race: %d %s", final.Status, final.Body)
		}
		if got := len(imports(t, ts.Ledger, pid)); got != attempt+1 {
			t.Fatalf("after attempt %d: %d imports in the ledger, want %d", attempt, got, attempt+1)
		}
	}
	if !sawInFlight {
		t.Fatalf("no request ever saw the key in flight (409) in %d races of 50", races)
	}
}

// An answer leaves only once it is recorded under its key. A request whose
// record cannot be written (here: lost while the request ran), or that runs
// past its lease on the key, answers 503 outcome-unknown with Retry-After;
// the retry makes no second effect and answers the original result.
func TestAnAnswerIsSentOnlyOnceRecorded(t *testing.T) {
	t.Parallel()
	var target atomic.Pointer[testStack]
	var stall, lose atomic.Bool
	var pid string
	key := "deposit-unrecorded"
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts := target.Load()
		if r.URL.Path == "/edge/bank" && stall.Load() {
			// Until the request's lease cancels it (or the test ends). The
			// body is read, so the server notices the client leave.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
			return
		}
		if r.URL.Path == "/edge/bank" && lose.CompareAndSwap(true, false) {
			eventlogtest.LoseKeyRecord(t, ts.Ledger.ClientURL(), domain.Sandbox, pid, key)
		}
		u, _ := url.Parse(ts.URL)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	defer front.Close()
	ts := startStack(t, withPublicURL(front.URL), withNATSListen("127.0.0.1:0"), withRequestLease(2*time.Second))
	target.Store(ts)
	c, id := ts.partner(t)
	pid = id
	church := importChurch(t, c, "Grace")
	body := `{"church_id":"` + church + `","account_ref":"acct_1","amount":5.00}`
	h := apitest.Header{"Idempotency-Key": key}

	// Past its lease: cancelled, the key released, 503.
	stall.Store(true)
	r := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, h)
	checkProblem(t, r, 503, "outcome-unknown")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	stall.Store(false)

	// The record is lost while the request runs: the answer is not sent.
	lose.Store(true)
	checkProblem(t, c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, h), 503, "outcome-unknown")
	if n := countEvents(t, ts, "deposit.received"); n != 1 {
		t.Fatalf("%d deposit.received after the unrecorded run, want 1", n)
	}
	// The retry runs again (no record) and answers what the first run did:
	// the same bank webhook, recognised by the edge, credited once.
	final := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, h)
	if final.Status != 200 || final.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("retry: %d %s", final.Status, final.Body)
	}
	again := c.Do(http.MethodPost, "/sandbox/simulate/deposit", body, h)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, final.Body) {
		t.Fatalf("replay: %s %s", again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	if n := countEvents(t, ts, "deposit.received"); n != 1 {
		t.Fatalf("%d deposit.received for one key, want 1", n)
	}
}
