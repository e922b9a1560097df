package e2e

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/secrets"
)

// liveTargets is the set of instances a load may send to right now.
type liveTargets struct {
	mu   sync.Mutex
	urls map[string]string // instance name → base URL, while it runs
}

func (l *liveTargets) set(name, url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urls == nil {
		l.urls = map[string]string{}
	}
	if url == "" {
		delete(l.urls, name)
	} else {
		l.urls[name] = url
	}
}

func (l *liveTargets) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, u := range l.urls {
		out = append(out, u)
	}
	return out
}

// Kill the single-node server (its embedded NATS with it) ten times in the
// middle of a load of mixed writes (imports, donor sessions, webhook
// endpoints, deposit simulations), restarting it each time, and retry every
// request whose answer was lost with its key: each key ends with exactly
// one effect, every re-send replays its answer, what was answered reads
// back, and the projections equal a fresh replay.
func TestCrashMidLoadThenRetryEveryKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	const origin = "https://crash.example"
	partners := make([]loadPartner, 2)
	for i := range partners {
		p := decodeCLI(t, runCLI(t, nil, "partners", "create", "--name", "Crash Partner", "--redirect-origin", origin, "--json", "--data", dir))
		partners[i] = loadPartner{ID: p.PartnerID, APIKey: p.APIKey, Origin: origin}
	}
	// The server comes back at its address: its answers (a session's url)
	// name it. An append that finds another in flight joins an atomic batch
	// (group commit), so the clients' writes are killed in batches too. At
	// 6 clients appends overlapped so seldom (one to five batches a run)
	// that about one run in five or six had none, and failed the check
	// below; 12 overlap enough.
	args := []string{"--rate-limit", "100000", "--rate-burst", "100000", "--addr", freeAddr(t), "--group-commit-at", "1"}
	srv := startServer(t, dir, nil, args...)
	for i, p := range partners {
		partners[i].Church = importChurch(t, &apitest.Client{TB: t, Base: srv.URL, Key: p.APIKey}, "Crash Church")
	}
	// Enrollments for the load's moves (update, pause, resume, cancel),
	// made through the ledger: the hosted flow is not what this test kills.
	setup, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: srv.natsURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range partners {
		partners[i].Moves = movableEnrollments(t, setup, partners[i], 3)
	}
	setup.Close()
	rc := newReceiver(t, nil)

	const rounds, perRound = 10, 15
	jobs := writeLoad(partners, 100, "crash", rc.URL)
	var live liveTargets
	live.set("a", srv.URL)
	const clients = 12
	load := runChaosLoad(jobs, clients, live.list)
	var writes, events float64 // synced ledger writes and the events they stored
	for round := range rounds {
		waitFor(t, 2*time.Minute, "answers before the next kill", func() bool {
			return load.answered.Load() >= int64((round+1)*perRound)
		})
		m := scrapeMetrics(t, srv.metricsURL(t)).Families["giving_ledger_batch_size"]
		for _, s := range m.GetMetric() {
			writes += float64(s.GetHistogram().GetSampleCount())
			events += s.GetHistogram().GetSampleSum()
		}
		live.set("a", "")
		srv.kill()
		srv = startServer(t, dir, nil, args...)
		live.set("a", srv.URL)
	}
	load.wait(t)
	if load.answered.Load() < rounds*perRound+1 {
		t.Fatal("the load ended before the last kill")
	}
	if events <= writes {
		t.Fatalf("%.0f events in %.0f synced writes: no appends shared a batch, so the kills missed group commit", events, writes)
	}
	t.Logf("before the kills: %.0f events in %.0f synced writes", events, writes)

	l, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: srv.natsURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	effects := checkWrites(t, srv.URL, l, jobs)
	l.Close()
	t.Logf("single node: %d writes from %d clients, %d requests, %d SIGKILLs, %d lost answers retried (%d retries answered as replays); effects: %v (exactly one per key)",
		len(jobs), clients, load.sent.Load(), rounds, load.lost.Load(), load.replayed.Load(), effects)

	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\n%s", code, srv.Stderr)
	}
	// Offline: the projections equal a fresh replay of the ledger.
	ctx := context.Background()
	l, err = eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	live2, err := projections.Open(stack.ProjectionsPath(eventlog.Config{Env: domain.Sandbox, DataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer live2.Close()
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if err := projections.BuildFile(ctx, l, fresh, nil); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := projections.Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	if got, want := dumpStore(t, live2), dumpStore(t, rebuilt); !reflect.DeepEqual(got, want) {
		t.Fatal("after the crashes, the live projections differ from a fresh replay")
	}
	// Every session the ledger holds carries a phone the vault opens, and
	// it is the donor's: a kill between a phone key's write and the
	// session's append leaves at most a key nothing sealed with.
	secrets, err := secrets.Read("", dir)
	if err != nil {
		t.Fatal(err)
	}
	vault, err := vault.Open(ctx, l, secrets, vault.PhoneKeyTimes{})
	if err != nil {
		t.Fatal(err)
	}
	sessions := 0
	var after uint64
	for {
		recs, pending, err := l.Read(ctx, l.Subjects().OfType("donor_session.created"), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			after = r.Seq
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			p := ev.Payload.(*domain.SessionCreated)
			phone, err := vault.Phone(ctx, p.DonorID, p.Phone)
			if err != nil || p.Phone == nil || vault.DonorID(ev.PartnerID, phone) != p.DonorID {
				t.Fatalf("session %s: its phone %v, sealed %v; want the donor's, opened with its key", ev.AggregateID, err, p.Phone != nil)
			}
			sessions++
		}
		if pending == 0 || len(recs) == 0 {
			break
		}
	}
	if sessions == 0 {
		t.Fatal("the load stored no donor session")
	}
	t.Logf("%d donor sessions, each with its donor's phone", sessions)
}
