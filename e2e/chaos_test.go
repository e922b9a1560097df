package e2e

import (
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
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
	const masterKey = "5e1c2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778b"
	ledgerStream := eventlog.StreamName(domain.Sandbox)
	requestsBucket, _ := eventlogtest.KeyRecord(domain.Sandbox, "", "")
	requestsStream := "KV_" + requestsBucket
	names := []string{"a", "b"}
	f := startFleet(t, masterKey, []string{"--group-commit-at", "1"}, names...)
	cluster := f.cluster
	partners := f.partners(t, 3, "Chaos", "https://chaos.example")
	rc := newReceiver(t, nil)
	jobs := writeLoad(partners, 80, "chaos", rc.URL)
	load := runChaosLoad(jobs, 8, f.live.list)

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
			f.kill(victim)
			f.start(t, victim)
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

	l := f.ledger(t)
	retried := 0
	for _, j := range jobs {
		if j.lost > 0 {
			retried++
		}
	}
	effects := checkWrites(t, f.url("b"), l, jobs)
	t.Logf("chaos: %d writes from 8 clients, %d requests; faults: %v; %d lost answers (%d keys) retried (%d retries answered as replays); effects: %v (exactly one per key)",
		len(jobs), load.sent.Load(), kills, load.lost.Load(), retried, load.replayed.Load(), effects)
}
