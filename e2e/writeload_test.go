package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ---- A load of partner writes while instances and nodes die ----

// freeAddr is a loopback address that was free a moment ago, for a server
// that must come back where it was after a crash.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// loadPartner is a partner the write load acts as, with one church of its
// own for sessions and deposits, and enrollments for the load to move.
type loadPartner struct {
	ID, APIKey, Church, Origin string
	Moves                      []enrollmentMove
}

// enrollmentMove is one move the load makes on an enrollment of its own:
// update (to a lower value, so it applies at once), pause, resume or cancel.
type enrollmentMove struct {
	Kind, EnrollmentID string
}

// moveKinds are the enrollment moves of the load, and the event each one
// appends.
var moveKinds = map[string]string{"update": "enrollment.updated", "pause": "enrollment.paused", "resume": "enrollment.resumed", "cancel": "enrollment.canceled"}

// movableEnrollments makes n enrollments of the partner's church for each
// move kind, each in a status that allows its move (active; paused for a
// resume), through the ledger l.
func movableEnrollments(t *testing.T, l *eventlog.Ledger, p loadPartner, n int) []enrollmentMove {
	t.Helper()
	ctx := context.Background()
	var out []enrollmentMove
	for range n {
		for _, kind := range []string{"update", "pause", "resume", "cancel"} {
			rec, err := createEnrollment(ctx, l, p.ID, p.Church)
			if err == nil {
				_, err = activateEnrollment(ctx, l, p.ID, rec.Aggregate)
			}
			if err == nil && kind == "resume" {
				_, err = execute(ctx, l, p.ID, rec.Aggregate, func(h eventlog.History) (*domain.Event, error) {
					e := domain.Fold[domain.Enrollment](h.Events)
					return domain.PauseEnrollment(&e, time.Now())
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, enrollmentMove{Kind: kind, EnrollmentID: rec.Aggregate})
		}
	}
	return out
}

// writeJob is one partner write of the load, identified by its key.
type writeJob struct {
	kind    string // import, session, endpoint or deposit
	partner loadPartner
	key     string
	path    string
	body    []byte
	// status and answer are the final answer; lost counts the answers lost
	// before it (a connection error or a 5xx); err is set when none came.
	status int
	answer []byte
	lost   int
	err    error
}

// writeKinds are the load's writes, and the status each answers when done
// (or 200, replayed).
var writeKinds = map[string]int{"import": http.StatusOK, "session": http.StatusCreated, "endpoint": http.StatusCreated, "deposit": http.StatusOK,
	"update": http.StatusOK, "pause": http.StatusOK, "resume": http.StatusOK, "cancel": http.StatusOK}

// writeLoad makes n writes per partner, mixed: imports, donor sessions and
// deposit simulations in turn, every eighth a webhook endpoint (at most
// twelve per partner, under the endpoint limit) pointing at receiver, and
// every fifth, while the partner has some, one of its enrollment moves.
func writeLoad(partners []loadPartner, n int, prefix, receiver string) []*writeJob {
	var jobs []*writeJob
	for pi, p := range partners {
		endpoints, moves := 0, p.Moves
		for i := range n {
			key := fmt.Sprintf("%s-%d-%04d", prefix, pi, i)
			j := &writeJob{partner: p, key: key}
			switch {
			case i%5 == 4 && len(moves) > 0:
				m := moves[0]
				moves = moves[1:]
				j.kind, j.path = m.Kind, "/v1/enrollments/"+m.EnrollmentID+"/"+m.Kind
				switch m.Kind {
				case "update":
					j.body = []byte(`{"value":1.25}`)
				case "cancel":
					j.body = fmt.Appendf(nil, `{"reason":"Asked to stop (%s)."}`, key)
				}
			case i%8 == 7 && endpoints < 12:
				endpoints++
				j.kind, j.path = "endpoint", "/v1/webhook_endpoints"
				j.body = fmt.Appendf(nil, `{"url":%q,"event_types":["enrollment.ended"]}`, receiver+"/"+key)
			case i%3 == 0:
				j.kind, j.path = "import", importPath
				j.body = fmt.Appendf(nil, `{"churches":[{"name":"Church %s","external_id":%q},{"name":""}]}`, key, key)
			case i%3 == 1:
				j.kind, j.path = "session", "/v1/donor_sessions"
				j.body = []byte(sessionBody(p.Church, fmt.Sprintf("+1202555%04d", i), "pct", "5", p.Origin+"/done"))
			default:
				j.kind, j.path = "deposit", "/sandbox/simulate/deposit"
				j.body = fmt.Appendf(nil, `{"church_id":%q,"account_ref":"acct_%d","amount":%d.25}`, p.Church, i%5, 1+i%40)
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// send posts the write once to base.
func (j *writeJob) send(client *http.Client, base string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, base+j.path, bytes.NewReader(j.body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+j.partner.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", j.key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, body, resp.Header, nil
}

// chaosLoad runs write jobs with workers, each job against whichever
// instance targets names at the time, until every job has a final answer:
// a lost answer (connection error or 5xx) is retried with the same key
// against any instance, a 409 (the key still running) after Retry-After.
type chaosLoad struct {
	jobs    []*writeJob
	targets func() []string
	// answered counts final answers, replayed those of them that were
	// replays (a retry answered from the key's record or its recalled
	// effect); sent counts requests, lost the answers lost.
	answered, replayed, sent, lost atomic.Int64
	done                           chan struct{}
}

func runChaosLoad(jobs []*writeJob, workers int, targets func() []string) *chaosLoad {
	l := &chaosLoad{jobs: jobs, targets: targets, done: make(chan struct{})}
	queue := make(chan *writeJob)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: time.Minute}
			for j := range queue {
				l.finish(client, j)
			}
		}()
	}
	go func() {
		for _, j := range jobs {
			queue <- j
		}
		close(queue)
		wg.Wait()
		close(l.done)
	}()
	return l
}

func (l *chaosLoad) finish(client *http.Client, j *writeJob) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		targets := l.targets()
		if len(targets) == 0 {
			time.Sleep(50 * time.Millisecond) // every instance is down: wait for one
			continue
		}
		l.sent.Add(1)
		status, body, h, err := j.send(client, targets[rand.N(len(targets))])
		switch {
		case err != nil || status >= 500:
			j.lost++
			l.lost.Add(1)
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs*1000, 100)) * time.Millisecond)
		case status == http.StatusConflict && h.Get("Retry-After") != "":
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs, 1)) * time.Second)
		default:
			j.status, j.answer = status, body
			if h.Get("Idempotent-Replayed") == "true" {
				l.replayed.Add(1)
			}
			l.answered.Add(1)
			return
		}
	}
	j.err = fmt.Errorf("%s %s: no final answer within 3 minutes", j.kind, j.key)
}

// finished reports whether every job has its final answer.
func (l *chaosLoad) finished() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// wait waits until every job has its final answer.
func (l *chaosLoad) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the load did not finish within 5 minutes")
	}
}

// checkWrites asserts what the load's partners were promised: every job got
// its kind's success answer; every re-send of a key replays that answer
// byte for byte; what was acknowledged reads back the same; and the ledger
// (read through l) holds exactly one effect per key. It returns the effects
// counted per kind.
func checkWrites(t *testing.T, base string, l *eventlog.Ledger, jobs []*writeJob) map[string]int {
	t.Helper()
	client := &http.Client{Timeout: time.Minute}
	answered := map[string]string{} // the id each key's answer names
	for _, j := range jobs {
		if j.err != nil {
			t.Fatal(j.err)
		}
		if j.status != writeKinds[j.kind] && j.status != http.StatusOK { // a replay is 200
			t.Fatalf("%s %s: final answer %d %s", j.kind, j.key, j.status, j.answer)
		}
		status, body, h, err := j.send(client, base)
		if err != nil || status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, j.answer) {
			t.Fatalf("%s %s: re-send answered %d replayed=%q (%v)\n%s\nwant\n%s", j.kind, j.key, status, h.Get("Idempotent-Replayed"), err, body, j.answer)
		}
		answered[j.key] = checkReadBack(t, client, base, j)
	}
	effects := map[string]int{}
	perKey := map[string]int{}
	for _, j := range jobs {
		perKey[j.key] = 0
	}
	byID := map[string][]string{} // id → keys answering it
	for k, id := range answered {
		byID[id] = append(byID[id], k)
	}
	count := func(kind, id string) {
		keys := byID[id]
		if len(keys) == 0 {
			t.Fatalf("the ledger holds a %s (%s) no key's answer names: a second effect", kind, id)
		}
		perKey[keys[0]]++
		effects[kind]++
	}
	for _, ev := range ledgerEvents(t, l, "church.imported") {
		for _, c := range ev.Payload.(*domain.ChurchesImported).Created {
			if c.ExternalID != nil && byID[*c.ExternalID] != nil {
				perKey[*c.ExternalID]++
				effects["import"]++
			}
		}
	}
	for _, ev := range ledgerEvents(t, l, "donor_session.created") {
		if byID[ev.AggregateID] != nil || strings.HasPrefix(ev.AggregateID, "ds_") {
			count("session", ev.AggregateID)
		}
	}
	for _, ev := range ledgerEvents(t, l, "webhook_endpoint.created") {
		count("endpoint", ev.AggregateID)
	}
	for _, ev := range ledgerEvents(t, l, "deposit.received") {
		count("deposit", ev.Payload.(*domain.DepositReceived).Trace)
	}
	moved := map[string]string{} // enrollment → the move the load made on it
	for _, j := range jobs {
		if _, ok := moveKinds[j.kind]; ok {
			moved[strings.Split(j.path, "/")[3]] = j.kind
		}
	}
	for kind, eventType := range moveKinds {
		for _, ev := range ledgerEvents(t, l, eventType) {
			if moved[ev.AggregateID] == kind {
				count(kind, ev.AggregateID)
			}
		}
	}
	for _, j := range jobs {
		if perKey[j.key] != 1 {
			t.Fatalf("%s %s: %d effects in the ledger, want exactly 1", j.kind, j.key, perKey[j.key])
		}
	}
	return effects
}

// checkReadBack reads an acknowledged write back and compares it with the
// answer; it returns the id the answer names (for an import, the key, which
// is the church's external id; for a deposit, its trace).
func checkReadBack(t *testing.T, client *http.Client, base string, j *writeJob) string {
	t.Helper()
	var answer map[string]any
	if err := json.Unmarshal(j.answer, &answer); err != nil {
		t.Fatalf("%s %s: %v", j.kind, j.key, err)
	}
	var id, path string
	var want map[string]any
	switch j.kind {
	case "import":
		want = answer["results"].([]any)[0].(map[string]any)["church"].(map[string]any)
		id, path = j.key, "/v1/churches/"+want["id"].(string)
	case "session":
		want, id = answer, answer["id"].(string)
		path = "/v1/donor_sessions/" + id
	case "endpoint":
		want, id = answer, answer["id"].(string)
		path = "/v1/webhook_endpoints/" + id
	case "update", "pause", "resume", "cancel":
		want, id = answer, answer["enrollment_id"].(string)
		path = "/v1/enrollments/" + id
	case "deposit":
		sim := answer["simulated"].(map[string]any)
		if answer["status_code"].(float64) != 200 {
			t.Fatalf("deposit %s: the edge answered %s", j.key, j.answer)
		}
		return sim["trace"].(string)
	}
	// A read waits for what the instance wrote to be applied, and answers
	// 503 with Retry-After if that takes longer than it waits (an instance
	// restarted under load catching up): a partner retries, as this does.
	var got map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+j.partner.APIKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" && time.Now().Before(deadline) {
			t.Logf("%s %s: read back %s: 503, retried", j.kind, j.key, path)
			time.Sleep(time.Second)
			continue
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: read back %s: %d %v %v", j.kind, j.key, path, resp.StatusCode, err, got)
		}
		break
	}
	for k, v := range got {
		if w, ok := want[k]; ok && !reflect.DeepEqual(v, w) {
			t.Fatalf("%s %s: %s reads %v, answered %v", j.kind, j.key, k, v, w)
		}
	}
	return id
}
