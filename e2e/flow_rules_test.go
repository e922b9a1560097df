package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/vault"
)

// verifiedDonor opens a session and takes its donor through phone
// verification and consent.
func verifiedDonor(t *testing.T, d *donorBrowser) {
	t.Helper()
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"000000"}}).expect(t, http.StatusOK, "Agree to give")
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
}

func TestFlowCodeRules(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")

	t.Run("five wrong codes lock the session, resends do not reset the count", func(t *testing.T) {
		s := openSession(t, c, church, "+12025550100", "fixed", "25.50", "https://partner.example/back")
		d := newDonorBrowser(t, s.URL, nil)
		d.open("")
		d.submit("code", nil)
		for i := 1; i <= 4; i++ {
			p := d.submit("verify", url.Values{"code": {"111111"}})
			want := fmt.Sprintf("You have %d tries left.", 5-i)
			if i == 4 {
				want = "You have 1 try left."
			}
			if !strings.Contains(p.Body, want) {
				t.Fatalf("try %d: want %q in\n%s", i, want, p.Body)
			}
			if i == 2 {
				clock.advance(domain.CodeResendWait + time.Second)
				if p := d.submit("code", nil); strings.Contains(p.Body, `id="send-error"`) {
					t.Fatalf("resend after the wait was refused: %s", p.Body)
				}
			}
		}
		csrf := d.page.csrf()
		p := d.submit("verify", url.Values{"code": {"111111"}})
		p.expect(t, http.StatusOK, "Too many wrong codes")
		// Locked for good: even the right code (resubmitted from the
		// previous page) changes nothing.
		d.submit("verify", url.Values{"code": {"000000"}, "csrf": {csrf}}).expect(t, http.StatusOK, "Too many wrong codes")
		if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.phone_verified"); n != 0 {
			t.Fatal("a locked session verified its phone")
		}
		if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.locked"); n != 1 {
			t.Fatalf("%d locked events", n)
		}
	})

	t.Run("a code expires after 10 minutes", func(t *testing.T) {
		s := openSession(t, c, church, "+12025550100", "pct", "1", "https://partner.example/back")
		d := newDonorBrowser(t, s.URL, nil)
		d.open("")
		d.submit("code", nil)
		clock.advance(domain.CodeLifetime + time.Second)
		p := d.submit("verify", url.Values{"code": {"000000"}})
		if !strings.Contains(p.Body, "That code has expired.") || !strings.Contains(p.Body, `aria-describedby="code-hint code-error"`) {
			t.Fatalf("expired code: %s", p.Body)
		}
		d.submit("code", nil)
		d.submit("verify", url.Values{"code": {"000000"}}).expect(t, http.StatusOK, "Agree to give")
		if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.code_rejected"); n != 0 {
			t.Fatalf("an expired code counted as a wrong try (%d)", n)
		}
	})
}

func TestFlowIdentityScreens(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")

	review := openSession(t, c, church, "+12025550101", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, review.URL, nil)
	verifiedDonor(t, d)
	p := d.page
	p.expect(t, http.StatusOK, "We're reviewing your details")
	checkWaitPage(t, p, 30)
	if waitSessionStatus(t, c, review.ID, "open").Status != "open" {
		t.Fatal("a session in review stays open")
	}

	declined := openSession(t, c, church, "+12025550102", "pct", "2", "https://partner.example/back?a=1")
	d = newDonorBrowser(t, declined.URL, nil)
	verifiedDonor(t, d)
	d.page.expect(t, http.StatusOK, "We couldn't verify your identity")
	if !strings.Contains(d.page.Body, `href="https://partner.example/back?a=1&amp;session_id=`+declined.ID+`&amp;status=declined"`) {
		t.Fatalf("declined return link: %s", d.page.Body)
	}
	waitSessionStatus(t, c, declined.ID, "declined")
	d.open("").expect(t, http.StatusOK, "We couldn't verify your identity")

	// A phone that is not a seed goes to the identity vendor, and waits
	// for its decision.
	waiting := openSession(t, c, church, "+12025550123", "pct", "2", "https://partner.example/back")
	d = newDonorBrowser(t, waiting.URL, nil)
	verifiedDonor(t, d)
	d.page.expect(t, http.StatusOK, "Check your identity")
	d.verifyIdentity("wait").expect(t, http.StatusOK, "Checking your identity")
	checkWaitPage(t, d.page, 5)
}

func TestFlowExpiry(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	csrf := d.page.csrf()

	clock.advance(domain.SessionLifetime + time.Second)
	p := d.open("")
	p.expect(t, http.StatusGone, "This link has expired")
	checkFlowHeaders(t, p)
	// A form of the expired session changes nothing and shows the same page.
	d.submit("code", url.Values{"csrf": {csrf}}).expect(t, http.StatusGone, "This link has expired")
	newDonorBrowser(t, s.URL, nil).open("").expect(t, http.StatusGone, "This link has expired")
	waitSessionStatus(t, c, s.ID, "expired")
	// The pages write nothing: the sweeper records the expiry, once.
	waitFor(t, 10*time.Second, "donor_session.expired", func() bool {
		return sessionEvents(t, ts.Ledger, s.ID, "donor_session.expired") > 0
	})
	if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.expired"); n != 1 {
		t.Fatalf("%d donor_session.expired events, want 1", n)
	}
	if n := sessionEvents(t, ts.Ledger, s.ID, "donor_session.code_sent"); n != 0 {
		t.Fatal("an expired session sent a code")
	}
}

// TestSweeperExpiresOnce races several sweepers (the stack's own and two
// more) over the same due sessions: each session expires exactly once.
func TestSweeperExpiresOnce(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	var ids []string
	for i := 0; i < 12; i++ {
		ids = append(ids, openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back").ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.App.SweepSessions(ctx, 5*time.Millisecond)
		}()
	}
	clock.advance(domain.SessionLifetime + time.Second)
	// The API shows a due session as expired at once; wait for the events.
	waitFor(t, 20*time.Second, "every session to expire", func() bool {
		seen := map[string]bool{}
		for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.expired") {
			seen[ev.AggregateID] = true
		}
		return len(seen) == len(ids)
	})
	cancel()
	wg.Wait()
	counts := map[string]int{}
	for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.expired") {
		counts[ev.AggregateID]++
		if ev.Payload.(*domain.DonorSessionExpired).DonorSessionID != ev.AggregateID {
			t.Errorf("payload names %+v", ev.Payload)
		}
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("session %s expired %d times", id, counts[id])
		}
	}
}

// TestDonorsForget erases a donor's phone through the CLI (the binary), against a running
// instance and on a stopped one's data directory.
func TestDonorsForget(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withNATSListen("127.0.0.1:0"))
	c, partner := ts.partner(t)
	church := importChurch(t, c, "Grace")
	a := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
	b := openSession(t, c, church, "+12025550101", "pct", "2", "https://partner.example/back")
	forget := func(args ...string) (string, error) {
		r := runCLI(t, nil, append([]string{"donors", "forget"}, args...)...)
		if r.Code != 0 {
			return r.Stdout + r.Stderr, fmt.Errorf("exit %d", r.Code)
		}
		return r.Stdout + r.Stderr, nil
	}

	// Against the running instance, through its NATS listener, with the
	// master key from its data directory.
	running := []string{"--nats-url", ts.Ledger.ClientURL(), "--data", ts.Dir}
	if out, err := forget(append([]string{a.DonorID, "--partner", "pt_2pQm3s8JmYc5B9vXk0QeLr1nD7a"}, running...)...); err == nil {
		t.Fatalf("forgetting another partner's donor succeeded: %s", out)
	}
	if _, err := donorPhone(t, ts, partner, a.ID); err != nil {
		t.Fatalf("a refused forget erased the phone: %v", err)
	}
	if out, err := forget(a.DonorID, "--nats-url", ts.Ledger.ClientURL(), "--data", t.TempDir()); err == nil || !strings.Contains(out, "master key") {
		t.Fatalf("forget without the service's master key: %v %s", err, out)
	}
	out, err := forget(append([]string{a.DonorID, "--partner", partner}, running...)...)
	if err != nil || !strings.Contains(out, "phone erased") {
		t.Fatalf("forget: %v %s", err, out)
	}
	// The running instance found the donor's sessions in its projections,
	// not by a read of every session in the ledger.
	if !strings.Contains(out, "(the donor's sessions: from the projections of instance ") {
		t.Errorf("forget against a running instance did not ask it for the donor's sessions: %s", out)
	}
	if _, err := donorPhone(t, ts, partner, a.ID); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("after forget: %v", err)
	}
	// b's phone was sealed with a's key or the next one: either way it
	// stays.
	if phone, err := donorPhone(t, ts, partner, b.ID); err != nil || phone != "+12025550101" {
		t.Fatalf("another donor's phone after the forget: %q, %v", phone, err)
	}
	if out, err := forget(append([]string{a.DonorID}, running...)...); err != nil || !strings.Contains(out, "no phone stored") {
		t.Fatalf("second forget: %v %s", err, out)
	}
	if _, err := forget("dn_nope"); err == nil {
		t.Fatal("a malformed donor id was accepted")
	}

	// The flow for a forgotten donor ends gracefully.
	d := newDonorBrowser(t, a.URL, nil)
	p := d.open("")
	p.expect(t, http.StatusGone, "This link can no longer be used")
	checkFlowHeaders(t, p)

	// Offline: on the data directory of a stopped instance.
	dir := ts.Dir
	ts.stop()
	out, err = forget(b.DonorID, "--data", dir)
	if err != nil || !strings.Contains(out, "phone erased") || !strings.Contains(out, "data directory") {
		t.Fatalf("offline forget: %v %s", err, out)
	}
	if !strings.Contains(out, "(the donor's sessions: from every donor session in the ledger (no running instance answers))") {
		t.Errorf("offline forget did not read the ledger's sessions: %s", out)
	}
	ts2 := startStack(t, withDir(dir))
	if _, err := donorPhone(t, ts2, partner, b.ID); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("after offline forget: %v", err)
	}
	newDonorBrowser(t, ts2.URL+strings.TrimPrefix(b.URL, ts.URL), nil).open("").expect(t, http.StatusGone, "This link can no longer be used")
}
