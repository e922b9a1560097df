package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/projections"
)

// importJob is one import request of the load, identified by its key.
type importJob struct {
	key  string
	body []byte
	// first is the answer before the crash, when one arrived.
	first []byte
}

// postImport sends one import. It returns the status, body and headers, or
// an error when the connection failed (the server died).
func postImport(base, apiKey string, job *importJob) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, base+importPath, bytes.NewReader(job.body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.key)
	resp, err := http.DefaultClient.Do(req)
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

// Kill the server in the middle of a load of imports, restart it, retry every
// request with its key: each key ends with exactly one import, and the
// projections equal a fresh replay.
func TestCrashMidLoadThenRetryEveryKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	created := runCLI(t, nil, "partners", "create", "--name", "Crash Partner", "--redirect-origin", "https://crash.example",
		"--json", "--data", dir)
	if created.Code != 0 {
		t.Fatalf("partners create: %d %s", created.Code, created.Stderr)
	}
	var partner struct {
		PartnerID string `json:"partner_id"`
		APIKey    string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(created.Stdout), &partner); err != nil {
		t.Fatal(err)
	}

	const total, workers, killAfter = 300, 6, 40
	jobs := make([]*importJob, total)
	for i := range jobs {
		key := fmt.Sprintf("crash-%03d", i)
		jobs[i] = &importJob{key: key, body: fmt.Appendf(nil,
			`{"churches":[{"name":"Church %d","external_id":%q},{"name":""},{"name":"Annex %d","external_id":"%s-annex"}]}`, i, key, i, key)}
	}

	srv := startServer(t, dir, nil, "--rate-limit", "100000", "--rate-burst", "100000")
	var answered atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	queue := make(chan *importJob)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range queue {
				status, body, _, err := postImport(srv.URL, partner.APIKey, job)
				if err == nil && status == http.StatusOK {
					job.first = body
					if answered.Add(1) >= killAfter {
						once.Do(srv.kill)
					}
				}
			}
		}()
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	once.Do(srv.kill)
	if n := answered.Load(); n < killAfter || n >= total {
		t.Fatalf("%d of %d answered before the kill; the kill did not land mid-load", n, total)
	}
	t.Logf("%d of %d imports answered before SIGKILL", answered.Load(), total)

	// Restart on the same data directory and retry every request.
	srv = startServer(t, dir, nil, "--rate-limit", "100000", "--rate-burst", "100000")
	logUnanswered(t, srv, partner.PartnerID, jobs)
	finals := make([][]byte, total)
	var mu sync.Mutex
	var failures []string
	queue = make(chan *importJob)
	index := map[*importJob]int{}
	for i, j := range jobs {
		index[j] = i
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range queue {
				body, err := retryUntilFinal(srv.URL, partner.APIKey, job)
				mu.Lock()
				if err != nil {
					failures = append(failures, job.key+": "+err.Error())
				}
				finals[index[job]] = body
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d keys never got a final answer: %v", len(failures), failures[:min(5, len(failures))])
	}
	checker := &apitest.Client{TB: t, Base: srv.URL, Key: partner.APIKey}
	churchOf := map[string]string{}
	for i, j := range jobs {
		if j.first != nil && !bytes.Equal(j.first, finals[i]) {
			t.Fatalf("%s: the retry answered differently from before the crash\nbefore %s\nafter  %s", j.key, j.first, finals[i])
		}
		var out importResponse
		if err := json.Unmarshal(finals[i], &out); err != nil {
			t.Fatalf("%s: %v: %s", j.key, err, finals[i])
		}
		if len(out.Results) != 3 || out.Results[0].Status != "created" || out.Results[1].Status != "rejected" || out.Results[2].Status != "created" {
			t.Fatalf("%s: %s", j.key, finals[i])
		}
		churchOf[j.key] = out.Results[0].Church.ID
	}
	// The answers agree with what the API reads back.
	var list struct {
		Data []struct {
			ID         string  `json:"id"`
			ExternalID *string `json:"external_id"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	listed := map[string]int{}
	for cursor := ""; ; {
		path := "/v1/churches?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		checker.Do(http.MethodGet, path, nil, nil).JSON(t, &list)
		for _, c := range list.Data {
			listed[*c.ExternalID]++
			if !strings.HasSuffix(*c.ExternalID, "-annex") && churchOf[*c.ExternalID] != c.ID {
				t.Fatalf("listed %s as %s, answered %s", *c.ExternalID, c.ID, churchOf[*c.ExternalID])
			}
		}
		if list.NextCursor == nil {
			break
		}
		cursor = *list.NextCursor
	}
	if len(listed) != 2*total {
		t.Fatalf("listed %d distinct external ids, want %d", len(listed), 2*total)
	}

	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\n%s", code, srv.Stderr)
	}

	// Offline: the ledger holds exactly one import per key, and the
	// projections equal a fresh replay.
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	perKey := map[string]int{}
	for _, imp := range imports(t, l, partner.PartnerID) {
		for _, c := range imp.Created {
			if c.ExternalID != nil && !strings.HasSuffix(*c.ExternalID, "-annex") {
				perKey[*c.ExternalID]++
				if churchOf[*c.ExternalID] != c.ID {
					t.Fatalf("%s: ledger church %s, answered %s", *c.ExternalID, c.ID, churchOf[*c.ExternalID])
				}
			}
		}
	}
	for _, j := range jobs {
		if perKey[j.key] != 1 {
			t.Fatalf("%s: %d imports in the ledger, want exactly 1", j.key, perKey[j.key])
		}
	}
	if len(perKey) != total {
		t.Fatalf("ledger has imports for %d keys, want %d", len(perKey), total)
	}
	live, err := projections.Open(stack.ProjectionsPath(eventlog.Config{Env: domain.Sandbox, DataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if err := projections.BuildFile(ctx, l, fresh, nil); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := projections.Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	if got, want := dumpStore(t, live), dumpStore(t, rebuilt); !reflect.DeepEqual(got, want) {
		t.Fatal("after the crash, the live projections differ from a fresh replay")
	}
}

// retryUntilFinal repeats a request with its key until it gets a final
// answer, honouring Retry-After on 409 and 503.
func retryUntilFinal(base, apiKey string, job *importJob) ([]byte, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		status, body, h, err := postImport(base, apiKey, job)
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			return body, nil
		case http.StatusConflict, http.StatusServiceUnavailable:
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs, 1)) * time.Second)
		default:
			return nil, fmt.Errorf("status %d: %s", status, body)
		}
	}
	return nil, fmt.Errorf("no final answer within 2 minutes")
}

// logUnanswered reports how many imports reached the ledger without their
// answer reaching the client: the requests the retry must recall rather than
// run again.
func logUnanswered(t *testing.T, srv *server, partner string, jobs []*importJob) {
	t.Helper()
	l, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: srv.natsURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stored := map[string]bool{}
	for _, imp := range imports(t, l, partner) {
		for _, c := range imp.Created {
			stored[*c.ExternalID] = true
		}
	}
	unanswered := 0
	for _, j := range jobs {
		if j.first == nil && stored[j.key] {
			unanswered++
		}
	}
	t.Logf("%d imports were stored but unanswered when the server died", unanswered)
}
