package e2e

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// Two instances on the deploy example's 3-node cluster take a load of mixed
// writes from eight clients while the test SIGKILLs an instance (and
// restarts it), and, separately, stops the node leading the ledger stream
// or the idempotency bucket (and restarts it), several times each. Every
// request whose answer was lost is retried with its key against either
// instance until it gets a final answer. Then: every key has exactly one
// effect in the ledger, every re-send replays its answer byte for byte, and
// every acknowledged write reads back as answered.
func TestChaosOneEffectPerKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster and the binary")
	}
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	const masterKey = "5e1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778b"
	const origin = "https://chaos.example"
	ledgerStream := eventlog.StreamName(domain.Sandbox)
	requestsBucket, _ := eventlog.KeyRecord(domain.Sandbox, "", "")
	requestsStream := "KV_" + requestsBucket

	// The instances share a public address, as behind a load balancer: a
	// donor session's url, and the simulators' edge, are that address.
	var live liveTargets
	lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		u, _ := url.Parse("http://127.0.0.1:1") // none up: refused, a 502
		if targets := live.list(); len(targets) > 0 {
			u, _ = url.Parse(targets[rand.N(len(targets))])
		}
		pr.SetURL(u)
	}})
	t.Cleanup(lb.Close)
	cli := []string{"--nats-url", cluster.URL(), "--replicas", "3", "--master-key", masterKey}
	names := []string{"a", "b"}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
	addrs := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	servers := map[string]*server{}
	start := func(name string) {
		args := append([]string{"--data", dirs[name], "--addr", addrs[name], "--public-url", lb.URL,
			"--rate-limit", "100000", "--rate-burst", "100000", "--group-commit-at", "1"}, cli...)
		servers[name] = launchServe(t, nil, args...)
		live.set(name, "http://"+addrs[name])
	}
	for _, n := range names {
		start(n)
	}

	partners := make([]loadPartner, 3)
	for i := range partners {
		p := decodeCLI(t, runCLI(t, nil, append([]string{"partners", "create", "--name", "Chaos Partner", "--redirect-origin", origin,
			"--json", "--data", t.TempDir()}, cli...)...))
		for _, n := range names {
			waitStatus(t, "http://"+addrs[n], p.APIKey, http.StatusOK)
		}
		c := &apitest.Client{TB: t, Base: "http://" + addrs["a"], Key: p.APIKey}
		partners[i] = loadPartner{ID: p.PartnerID, APIKey: p.APIKey, Origin: origin, Church: importChurch(t, c, "Chaos Church")}
	}
	rc := newReceiver(t, nil)
	jobs := writeLoad(partners, 80, "chaos", rc.URL)
	load := runChaosLoad(jobs, 8, live.list)

	faults := []string{"instance", "ledger leader", "idempotency leader"}
	const rounds = 3
	step := int64(len(jobs) / (rounds*len(faults) + 2))
	kills := map[string]int{}
	progress := func(what string, n int64) {
		waitFor(t, 3*time.Minute, what, func() bool { return load.answered.Load() >= n })
	}
	for i := range rounds * len(faults) {
		progress("answers before the next fault", int64(i+1)*step)
		fault := faults[i%len(faults)]
		kills[fault]++
		switch fault {
		case "instance":
			victim := names[(i/len(faults))%len(names)]
			live.set(victim, "")
			servers[victim].kill()
			start(victim)
		default:
			stream := ledgerStream
			if fault == "idempotency leader" {
				stream = requestsStream
			}
			var leader int
			waitFor(t, time.Minute, "a leader of "+stream, func() bool { leader = cluster.Leader(stream); return leader >= 0 })
			cluster.Stop(leader)
			// Let the load run on the two nodes left, then bring the
			// node back and wait until it has caught up, so the next
			// fault never costs the quorum. Once every write has its
			// final answer no more can come: waiting out the deadline
			// then would only idle.
			until := load.answered.Load() + step/2
			deadline := time.Now().Add(20 * time.Second)
			waitFor(t, time.Minute, "answers with a node down", func() bool {
				return load.answered.Load() >= until || load.finished() || time.Now().After(deadline)
			})
			cluster.Restart(leader)
			waitFor(t, 2*time.Minute, "the cluster to catch up", func() bool { return cluster.Current(ledgerStream, requestsStream) })
		}
	}
	load.wait(t)

	l, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: cluster.URL(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	retried := 0
	for _, j := range jobs {
		if j.lost > 0 {
			retried++
		}
	}
	effects := checkWrites(t, "http://"+addrs["b"], l, jobs)
	t.Logf("chaos: %d writes from 8 clients, %d requests; faults: %v; %d lost answers (%d keys) retried (%d retries answered as replays); effects: %v (exactly one per key)",
		len(jobs), load.sent.Load(), kills, load.lost.Load(), retried, load.replayed.Load(), effects)
}
