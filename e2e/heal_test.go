package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
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
	const masterKey = "6f1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778c"
	ledgerStream := eventlog.StreamName(domain.Sandbox)
	names := []string{"a", "b"}
	f := startFleet(t, masterKey, nil, names...)
	cluster := f.cluster
	partners := f.partners(t, 2, "Heal", "https://heal.example")
	rc := newReceiver(t, nil)
	jobs := writeLoad(partners, 300, "heal", rc.URL)
	load := runChaosLoad(jobs, 6, f.live.list)

	// A write straight to one instance, under a key of its own.
	client := &http.Client{Timeout: 10 * time.Second}
	probes := 0
	writes := func(name string) bool {
		probes++
		req, _ := http.NewRequest(http.MethodPost, f.url(name)+importPath, bytes.NewReader([]byte(`{"churches":[{"name":"Probe"}]}`)))
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
				node = cluster.Serving(f.dirs[fault[len(fault)-1:]])
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

	effects := checkWrites(t, f.url("b"), f.ledger(t), jobs)
	t.Logf("heal: node losses %v; both instances served writes again after %v; %d writes from 6 clients, %d requests, %d lost answers retried; effects: %v (exactly one per key)",
		faults, healed, len(jobs), load.sent.Load(), load.lost.Load(), effects)
	for _, s := range f.servers {
		if s.Stderr.String() == "" && s.Stdout.String() == "" {
			t.Fatal("an instance logged nothing")
		}
	}
}
