package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// startDeployCluster runs the 3-node cluster of deploy/nats on loopback: the
// files as shipped, with only ports, hosts and the store moved for the test.
// It returns the client URLs with the configured credentials.
func startDeployCluster(t *testing.T) ([]*natsserver.Server, []string) {
	t.Helper()
	clusterPorts := freePorts(t, 3)
	var routes []*url.URL
	servers := make([]*natsserver.Server, 3)
	var urls []string
	for i := range 3 {
		opts, err := natsserver.ProcessConfigFile(filepath.Join("..", "..", "deploy", "nats", fmt.Sprintf("nats-%d.conf", i+1)))
		if err != nil {
			t.Fatalf("deploy/nats/nats-%d.conf: %v", i+1, err)
		}
		if i == 0 {
			for _, r := range opts.Routes {
				r.Host = fmt.Sprintf("127.0.0.1:%d", clusterPorts[len(routes)])
				routes = append(routes, r)
			}
		}
		opts.Routes = routes
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", natsserver.RANDOM_PORT, 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", clusterPorts[i]
		opts.StoreDir = t.TempDir()
		opts.NoLog, opts.NoSigs = true, true
		s, err := natsserver.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("node %d not ready", i+1)
		}
		servers[i] = s
		u, _ := url.Parse(s.ClientURL())
		u.User = url.UserPassword(opts.Username, opts.Password)
		urls = append(urls, u.String())
	}
	eventlogtest.WaitFor(t, 60*time.Second, "the JetStream cluster to elect a leader", func() bool {
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	// A leader is not enough: every peer must be known and online before a
	// three-replica stream can be placed. Probe with one.
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventlogtest.WaitFor(t, 60*time.Second, "the cluster to place a three-replica stream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLACEMENT_PROBE", Subjects: []string{"probe.>"}, Replicas: 3}); err != nil {
			return false
		}
		return js.DeleteStream(ctx, "PLACEMENT_PROBE") == nil
	})
	return servers, urls
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func withCluster(natsURL, masterKey string) stackOption {
	return func(c *stackConfig) {
		c.Ledger.NATSURL, c.Ledger.Replicas, c.MasterKey = natsURL, 3, masterKey
	}
}

// Two instances on the deploy example's 3-node cluster share one ledger,
// idempotency and cursors, and keep working when a node is lost.
func TestTwoInstancesOnTheDeployCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node cluster")
	}
	servers, urls := startDeployCluster(t)
	natsURL := strings.Join(urls, ",")
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

	// Losing one node of three leaves a quorum: writes go on.
	servers[2].Shutdown()
	eventlogtest.WaitFor(t, 60*time.Second, "a write with one node down", func() bool {
		return ca.Do(http.MethodPost, importPath, `{"churches":[{"name":"Still here"}]}`, nil).Status == 200
	})
}
