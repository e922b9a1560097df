package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
)

func withCluster(natsURL, masterKey string) stackOption {
	return func(c *stack.Config) {
		c.Ledger.NATSURL, c.Ledger.Replicas, c.MasterKey = natsURL, 3, masterKey
	}
}

// Two instances on the deploy example's 3-node cluster share one ledger,
// idempotency and cursors, and keep working when a node is lost.
func TestTwoInstancesOnTheDeployCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	// The files of deploy/nats as shipped, with only ports, hosts and the
	// store moved for the test; the URLs carry the configured credentials.
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	natsURL := cluster.URL()
	const masterKey = "3f1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778a"
	a := startStack(t, withCluster(natsURL, masterKey))
	b := startStack(t, withCluster(natsURL, masterKey))
	ca, _ := a.partner(t)
	cb := &apitest.Client{TB: t, Base: b.URL, Key: ca.Key}
	b.waitProjected(t)

	key := apitest.Header{"Idempotency-Key": "cluster-1"}
	body := `{"churches":[{"name":"North","external_id":"n-1"},{"name":"South","external_id":"s-1"}]}`
	first := ca.Do(http.MethodPost, importPath, body, key)
	if first.Status != 200 {
		t.Fatalf("import on A: %d %s", first.Status, first.Body)
	}
	// The same key on the other instance answers from the shared record.
	again := cb.Do(http.MethodPost, importPath, body, key)
	if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay on B: %d %s", again.Status, again.Body)
	}
	// B's projections follow the shared ledger; A's cursor pages on B.
	var imp importResponse
	first.JSON(t, &imp)
	b.waitProjected(t)
	if r := cb.Do(http.MethodGet, "/v1/churches/"+imp.Results[0].Church.ID, nil, nil); r.Status != 200 {
		t.Fatalf("church on B: %d", r.Status)
	}
	var page struct {
		NextCursor *string `json:"next_cursor"`
	}
	ca.Do(http.MethodGet, "/v1/churches?limit=1", nil, nil).JSON(t, &page)
	if r := cb.Do(http.MethodGet, "/v1/churches?limit=1&cursor="+*page.NextCursor, nil, nil); r.Status != 200 || !strings.Contains(string(r.Body), "South") {
		t.Fatalf("A's cursor on B: %d %s", r.Status, r.Body)
	}
	// An external id taken through A is taken on B.
	var dup importResponse
	cb.Do(http.MethodPost, importPath, `{"churches":[{"name":"North again","external_id":"n-1"}]}`, nil).JSON(t, &dup)
	if dup.Results[0].Status != "rejected" {
		t.Fatalf("B accepted an external id A already used: %+v", dup.Results[0])
	}
	// Clients of both instances naming one new external id at once: one
	// import stores it, every other is told it is taken.
	for round := range 5 {
		body := fmt.Sprintf(`{"churches":[{"name":"Raced","external_id":"race-%d"}]}`, round)
		outcomes := make(chan string, 6)
		var wg sync.WaitGroup
		for _, c := range []*apitest.Client{ca, cb, ca, cb, ca, cb} {
			wg.Go(func() {
				var r importResponse
				resp := c.Do(http.MethodPost, importPath, body, nil)
				if resp.Status != 200 {
					outcomes <- fmt.Sprintf("%d %s", resp.Status, resp.Body)
					return
				}
				resp.JSON(t, &r)
				outcomes <- r.Results[0].Status
			})
		}
		wg.Wait()
		close(outcomes)
		created := 0
		for o := range outcomes {
			switch o {
			case "created":
				created++
			case "rejected":
			default:
				t.Errorf("round %d: %s", round, o)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d imports stored one external id through two instances, want 1", round, created)
		}
	}

	// Losing one node of three leaves a quorum: writes go on.
	cluster.Stop(2)
	waitFor(t, 60*time.Second, "a write with one node down", func() bool {
		return ca.Do(http.MethodPost, importPath, `{"churches":[{"name":"Still here"}]}`, nil).Status == 200
	})
}

// Instances started together with a fresh cluster, before it has elected
// its leaders, all come up: creating the streams, buckets and consumers is
// idempotent and retried while the cluster settles.
func TestInstancesStartTogetherOnAFreshCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	cluster := eventlogtest.LaunchCluster(t, filepath.Join("..", "deploy", "nats"))
	const n = 3
	const masterKey = "3f1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778a"
	stacks := make([]*stack.Stack, n)
	errs := make([]error, n)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			stacks[i], errs[i] = stack.Open(ctx, stack.Config{
				Ledger:    eventlog.Config{Env: domain.Sandbox, DataDir: dirs[i], NATSURL: cluster.URL(), Replicas: 3},
				MasterKey: masterKey, PublicURL: "http://127.0.0.1:1", Log: zerolog.Nop(), RateLimit: httpapi.RateLimit{PerSecond: 100, Burst: 100},
			})
			if errs[i] == nil {
				errs[i] = stacks[i].Start(ctx)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	t.Logf("%d instances started together with a fresh 3-node cluster in %s", n, time.Since(start).Round(time.Millisecond))
	for i, st := range stacks {
		if st != nil {
			t.Cleanup(func() { st.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("instance %d of %d did not start: %v", i+1, n, errs[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, st := range stacks {
		if _, err := st.App.Ready(ctx); err != nil {
			t.Fatalf("instance %d not ready: %v", i+1, err)
		}
	}
}

// A write while the cluster has lost its quorum runs nowhere unclaimed and
// is acknowledged nowhere unrecorded: it is a 503 with Retry-After. Once the
// nodes are back, the retry with the same key runs, once.
func TestAWriteWithoutQuorumIsRefusedThenRunsOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	const masterKey = "3f1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778a"
	a := startStack(t, withCluster(cluster.URL(), masterKey), withRequestLease(2*time.Second))
	c, pid := a.partner(t)
	key := apitest.Header{"Idempotency-Key": "no-quorum"}
	body := `{"churches":[{"name":"Quorum Chapel","external_id":"q-1"}]}`

	cluster.Stop(1)
	cluster.Stop(2)
	r := c.Do(http.MethodPost, importPath, body, key)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a write without quorum: %d %s", r.Status, r.Body)
	}
	t.Logf("without quorum: %d %s", r.Status, r.Map(t)["type"])
	cluster.Restart(1)
	cluster.Restart(2)
	ledger, requests := eventlog.StreamName(domain.Sandbox), "KV_REQUESTS_SANDBOX"
	waitFor(t, 2*time.Minute, "the cluster to recover", func() bool { return cluster.Current(ledger, requests) })
	waitFor(t, time.Minute, "the retry to run", func() bool {
		r = c.Do(http.MethodPost, importPath, body, key)
		return r.Status == http.StatusOK
	})
	if again := c.Do(http.MethodPost, importPath, body, key); !bytes.Equal(again.Body, r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s", again.Body)
	}
	if n := len(imports(t, a.Ledger, pid)); n != 1 {
		t.Fatalf("%d imports for one key, want 1", n)
	}
}
