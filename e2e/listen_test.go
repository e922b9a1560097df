package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partnergiving/giving/listen"
)

// giving listen, the built binary, against a real server: it forwards a
// real enrollment's events (the hosted flow, then the payroll simulator)
// to a real local receiver, signed like deliveries with the secret it
// printed; started again after a clean stop, it forwards exactly the
// events appended meanwhile, none lost and none twice.
func TestListenForwardsTheFeedAndResumes(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Listen Chapel")
	_, before, _ := appendEnrollment(t, ts.Ledger, pid) // before the first start: not forwarded
	rc := okReceiver(t)
	stateDir := t.TempDir()
	args := []string{"listen", "--base-url", ts.URL, "--api-key", c.Key, "--forward-to", rc.URL, "--state-dir", stateDir}

	start := func() (*server, string) {
		p := launchCommand(t, "", nil, args...)
		var secret string
		p.waitPrinted(t, "its secret", func(line string) bool {
			_, rest, ok := strings.Cut(line, "local webhook signing secret is ")
			secret, _, _ = strings.Cut(rest, ";")
			return ok
		})
		return p, secret
	}
	stop := func(p *server) {
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatal("giving listen did not stop on SIGINT")
		}
		if p.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("giving listen exited %d: %s", p.cmd.ProcessState.ExitCode(), p.Stderr)
		}
	}

	p, secret := start()
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q", secret)
	}
	_, enrollment, _ := enrollByFlow(t, c, church, "pct", "3", nil)
	if r := c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", map[string]string{"enrollment_id": enrollment, "church_id": church}, nil); r.Status != http.StatusOK {
		t.Fatalf("payroll-connected: %d %s", r.Status, r.Body)
	}
	waitFor(t, 20*time.Second, "enrollment.created and enrollment.activated forwarded", func() bool {
		var types []string
		for _, d := range rc.deliveries() {
			types = append(types, d.EventType)
		}
		return strings.Join(types, ",") == "enrollment.created,enrollment.activated"
	})
	for _, d := range rc.deliveries() {
		if !strings.Contains(string(d.Body), enrollment) {
			t.Errorf("forwarded %s is not the enrollment's: %s", d.EventType, d.Body)
		}
	}
	waitFor(t, 10*time.Second, "a line per event", func() bool {
		return strings.Count(p.Stdout.String(), "-> 200 OK") == 2
	})
	stop(p)

	// While it is stopped, three more events.
	var missed []string
	for range 3 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		missed = append(missed, id)
	}
	p, again := start()
	if again != secret {
		t.Fatalf("the secret changed across restarts: %s, then %s", secret, again)
	}
	_, live, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 20*time.Second, "the missed and the new events forwarded", func() bool { return rc.accepted()[live] })
	stop(p)

	got := rc.received()
	if got[before] != 0 {
		t.Error("the event from before the first start was forwarded")
	}
	for _, id := range append(missed, live) {
		if got[id] != 1 {
			t.Errorf("event %s forwarded %d times, want once", id, got[id])
		}
	}
	if n := rc.count(); n != 6 {
		t.Errorf("%d forwards, want 6: %v", n, got)
	}
	// Both signature schemes, verified independently, and the delivery headers.
	rc.verifyAll(t, secret)
	if strings.Count(p.Stdout.String(), "-> 200 OK") != 4 {
		t.Errorf("second run printed:\n%s", p.Stdout)
	}

	// --from-start with a fresh state replays the whole feed, from before
	// the first start.
	replay := okReceiver(t)
	fresh := launchCommand(t, "", nil, "listen", "--base-url", ts.URL, "--api-key", c.Key, "--forward-to", replay.URL, "--state-dir", t.TempDir(), "--from-start")
	waitFor(t, 20*time.Second, "the whole feed replayed", func() bool { return replay.count() == 7 })
	if replay.deliveries()[0].EventID != before {
		t.Errorf("--from-start began with %s, want %s", replay.deliveries()[0].EventID, before)
	}
	stop(fresh)
}

// Stopped in the middle of a page, listen finishes the forward under way
// and keeps the position after exactly the events forwarded: the next run
// forwards the rest of the page, in feed order, none twice.
func TestListenStoppedMidPageResumesAfterTheLastForward(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	var want []string
	for range 5 {
		_, id, _ := appendEnrollment(t, ts.Ledger, pid)
		want = append(want, id)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	rc := newReceiver(t, func(n int, _ *http.Request, _ http.ResponseWriter) int {
		if n == 2 {
			close(reached)
			<-release
		}
		return http.StatusOK
	})
	cfg := listen.Config{BaseURL: ts.URL, APIKey: c.Key, ForwardTo: rc.URL, StateDir: t.TempDir(), FromStart: true, Out: &syncBuffer{}, Wait: 1}
	run := func(cfg listen.Config, stopWhen func() bool, during func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- listen.Run(ctx, cfg) }()
		waitFor(t, 20*time.Second, "the forwards", stopWhen)
		cancel()
		if during != nil {
			during()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("listen: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("listen did not stop")
		}
	}
	// Stop while the second event of the first page is being forwarded.
	run(cfg, func() bool {
		select {
		case <-reached:
			return true
		default:
			return false
		}
	}, func() { close(release) })
	if n := rc.count(); n != 2 {
		t.Fatalf("%d forwards before the stop, want 2", n)
	}
	cfg.FromStart = false
	run(cfg, func() bool { return rc.count() >= 5 }, nil)
	var got []string
	for _, d := range rc.deliveries() {
		got = append(got, d.EventID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded %v, want each of %v once, in order", got, want)
	}
}

// giving listen --rotate-secret replaces its local secret and signs with
// the previous one beside it until it expires, as an endpoint does after a
// rotation: a receiver holding either secret verifies every forward.
func TestListenRotatesItsSecretWithAnOverlap(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	rc := okReceiver(t)
	p := launchCommand(t, "", nil, "listen", "--base-url", ts.URL, "--api-key", c.Key, "--forward-to", rc.URL, "--state-dir", t.TempDir(), "--rotate-secret", "600")
	var secret, previous string
	p.waitPrinted(t, "the new secret", func(line string) bool {
		_, rest, ok := strings.Cut(line, "local webhook signing secret is ")
		secret, _, _ = strings.Cut(rest, ";")
		return ok
	})
	p.waitPrinted(t, "the previous secret", func(line string) bool {
		_, rest, ok := strings.Cut(line, "The previous secret ")
		previous, _, _ = strings.Cut(rest, " ")
		return ok
	})
	if !strings.HasPrefix(secret, "whsec_") || !strings.HasPrefix(previous, "whsec_") || secret == previous {
		t.Fatalf("secrets %q and %q", secret, previous)
	}
	_, id, _ := appendEnrollment(t, ts.Ledger, pid)
	waitFor(t, 20*time.Second, "the event forwarded", func() bool { return rc.accepted()[id] })
	for _, d := range rc.deliveries() {
		for _, s := range []string{previous, secret} {
			if err := verifySpecLines(s, d); err != nil {
				t.Errorf("forward %s: %v", d.EventID, err)
			}
			if err := verifyStandard(s, d.Header, d.Body); err != nil {
				t.Errorf("forward %s (Standard Webhooks): %v", d.EventID, err)
			}
		}
	}
	verifyStandardJS(t, previous, rc.deliveries())
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-p.done
}
