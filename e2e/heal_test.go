package e2e

import (
	"bytes"
	"context"
	"fmt"
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

// healWithin is how soon after losing a node of a 3-node cluster every
// instance must serve writes again, without a restart.
const healWithin = 30 * time.Second

// Two instances on the deploy example's 3-node cluster, under a load of
// mixed writes, lose a node: the one leading the ledger stream, or the one
// an instance is connected to. Each time, both instances serve writes again
// within healWithin without being restarted; then the node comes back. At
// the end every key of the load has exactly one effect and every
// acknowledged write reads back.
func TestInstancesHealAfterANodeLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster and the binary")
	}
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	const masterKey = "6f1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778c"
	const origin = "https://heal.example"
	ledgerStream := eventlog.StreamName(domain.Sandbox)

	var live liveTargets
	lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		u, _ := url.Parse("http://127.0.0.1:1")
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
	for _, name := range names {
		args := append([]string{"--data", dirs[name], "--addr", addrs[name], "--public-url", lb.URL,
			"--rate-limit", "100000", "--rate-burst", "100000"}, cli...)
		servers[name] = launchServe(t, nil, args...)
		live.set(name, "http://"+addrs[name])
	}

	partners := make([]loadPartner, 2)
	for i := range partners {
		p := decodeCLI(t, runCLI(t, nil, append([]string{"partners", "create", "--name", "Heal Partner", "--redirect-origin", origin,
			"--json", "--data", t.TempDir()}, cli...)...))
		for _, n := range names {
			waitStatus(t, "http://"+addrs[n], p.APIKey, http.StatusOK)
		}
		c := &apitest.Client{TB: t, Base: "http://" + addrs["a"], Key: p.APIKey}
		partners[i] = loadPartner{ID: p.PartnerID, APIKey: p.APIKey, Origin: origin, Church: importChurch(t, c, "Heal Church")}
	}
	rc := newReceiver(t, nil)
	jobs := writeLoad(partners, 300, "heal", rc.URL)
	load := runChaosLoad(jobs, 6, live.list)

	// A write straight to one instance, under a key of its own.
	client := &http.Client{Timeout: 10 * time.Second}
	probes := 0
	writes := func(name string) bool {
		probes++
		req, _ := http.NewRequest(http.MethodPost, "http://"+addrs[name]+importPath, bytes.NewReader([]byte(`{"churches":[{"name":"Probe"}]}`)))
		req.Header.Set("Authorization", "Bearer "+partners[0].APIKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("heal-probe-%d", probes))
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	faults := []string{"ledger leader", "node of a", "ledger leader", "node of b"}
	var healed []string
	for _, fault := range faults {
		var node int
		waitFor(t, time.Minute, "the node to stop for "+fault, func() bool {
			if fault == "ledger leader" {
				node = cluster.Leader(ledgerStream)
			} else {
				node = cluster.Serving(dirs[fault[len(fault)-1:]])
			}
			return node >= 0
		})
		before := load.answered.Load()
		cluster.Stop(node)
		lost := time.Now()
		for _, name := range names {
			waitFor(t, time.Until(lost.Add(healWithin)), fmt.Sprintf("instance %s to serve writes again after losing the %s (node %d)", name, fault, node), func() bool {
				if !writes(name) {
					time.Sleep(200 * time.Millisecond)
					return false
				}
				return true
			})
		}
		healed = append(healed, fmt.Sprintf("%s: %.1fs", fault, time.Since(lost).Seconds()))
		t.Logf("lost the %s (node %d): both instances serve writes after %s; %d of %d writes answered", fault, node, time.Since(lost).Round(100*time.Millisecond), load.answered.Load(), len(jobs))
		waitFor(t, time.Minute, "the load to go on", func() bool {
			n := load.answered.Load()
			return n > before || n == int64(len(jobs))
		})
		cluster.Restart(node)
		waitFor(t, 2*time.Minute, "the cluster to catch up", func() bool { return cluster.Current(ledgerStream) })
	}
	load.wait(t)

	l, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: cluster.URL(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	effects := checkWrites(t, "http://"+addrs["b"], l, jobs)
	t.Logf("heal: node losses %v; both instances served writes again after %v; %d writes from 6 clients, %d requests, %d lost answers retried; effects: %v (exactly one per key)",
		faults, healed, len(jobs), load.sent.Load(), load.lost.Load(), effects)
	for _, s := range servers {
		if s.Stderr.String() == "" && s.Stdout.String() == "" {
			t.Fatal("an instance logged nothing")
		}
	}
}
