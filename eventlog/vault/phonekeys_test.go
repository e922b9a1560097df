package vault_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/secrets"
)

// freezer is a loopback TCP proxy to a NATS server that can hold what its
// clients send (freeze), as a server that stops answering would look to
// them, and lets it through again, late (thaw).
type freezer struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	held   []heldChunk
}

type heldChunk struct {
	to   net.Conn
	data []byte
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go f.accept(t)
	return f
}

func (f *freezer) accept(t *testing.T) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		go func() { _, _ = io.Copy(c, s) }()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					chunk := bytes.Clone(buf[:n])
					f.mu.Lock()
					if f.frozen {
						f.held = append(f.held, heldChunk{to: s, data: chunk})
					} else {
						_, _ = s.Write(chunk)
					}
					f.mu.Unlock()
				}
				if err != nil {
					s.Close()
					return
				}
			}
		}()
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

// thaw sends what was held, in order, and what comes after.
func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.held {
		_, _ = h.to.Write(h.data)
	}
	f.held, f.frozen = nil, false
}

// heldCount counts the occurrences of s in what is held, in the order it
// was sent.
func (f *freezer) heldCount(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []byte
	for _, h := range f.held {
		all = append(all, h.data...)
	}
	return bytes.Count(all, []byte(s))
}

// While the vault cannot be written, a wave of new sessions that find no
// phone key waits for one attempt to make one, and each hears it failed
// within about that attempt's bound: not one attempt a session, nor one
// after another. Once the vault answers again, sealing works again.
func TestAWaveOfSessionsWaitsForOneKeyMaking(t *testing.T) {
	defer vault.SetNewKeyTimeoutForTest(time.Second)()
	ctx := context.Background()
	dir := t.TempDir()
	server, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir, NATSListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	u, err := url.Parse(server.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	f := newFreezer(t, u.Host)
	u.Host = f.ln.Addr().String()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, NATSURL: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	secrets, err := secrets.Load("", dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.Open(ctx, l, secrets, vault.PhoneKeyTimes{SealFor: time.Minute, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	f.freeze()
	const sessions = 16
	start := time.Now()
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, _, errs[i] = v.SealPhone(sctx, v.DonorID("pt_a", "+12025550100"), "+12025550100")
		})
	}
	wg.Wait()
	took := time.Since(start)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("session %d sealed with the vault unwritable", i)
		}
	}
	if took > 5*time.Second {
		t.Errorf("the wave took %s to hear the key could not be made; one attempt is bounded at 1 s", took)
	}
	if n := f.heldCount("$KV.VAULT_SANDBOX.pk_"); n != 1 {
		t.Errorf("%d sessions made %d attempts to store a phone key, want one", sessions, n)
	}

	f.thaw()
	sealed, _, err := v.SealPhone(ctx, v.DonorID("pt_a", "+12025550100"), "+12025550100")
	if err != nil {
		t.Fatalf("sealing once the vault answers again: %v", err)
	}
	if got, err := v.Phone(ctx, v.DonorID("pt_a", "+12025550100"), &sealed); err != nil || got != "+12025550100" {
		t.Fatalf("the phone sealed after the thaw opens to %q, %v", got, err)
	}
}
