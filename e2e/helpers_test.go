package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/sms"
)

// testStack is a real instance for a test: embedded JetStream and bbolt in a
// temporary directory, the HTTP API on a random loopback port.
type testStack struct {
	*stack
	URL  string
	Dir  string
	Logs *syncBuffer
	srv  *httptest.Server
}

type stackOption func(*stackConfig)

func withEnv(env domain.Environment) stackOption {
	return func(c *stackConfig) {
		c.Ledger.Env = env
		if env == domain.Production {
			// Production refuses to start without its vendors. These point
			// nowhere; tests that use a vendor set their own (withSMS).
			c.Vendors = httpapi.VendorSecrets{Payroll: []byte("prod-payroll"), Bank: []byte("prod-bank"), KYC: []byte("prod-kyc")}
			if c.SMS == nil {
				tw, err := sms.NewTwilio(sms.TwilioConfig{BaseURL: "http://127.0.0.1:1", AccountSID: "AC0", AuthToken: "t", ServiceSID: "VA0"})
				if err != nil {
					panic(err)
				}
				c.SMS = tw
			}
		}
	}
}

func withRateLimit(perSecond, burst int) stackOption {
	return func(c *stackConfig) { c.RateLimit = httpapi.RateLimit{PerSecond: perSecond, Burst: burst} }
}

func withDir(dir string) stackOption {
	return func(c *stackConfig) { c.Ledger.DataDir = dir }
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startStack(t testing.TB, opts ...stackOption) *testStack {
	t.Helper()
	logs := &syncBuffer{}
	cfg := stackConfig{
		Ledger:    eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir()},
		RateLimit: httpapi.RateLimit{PerSecond: 10000, Burst: 10000},
		Log:       zerolog.New(logs),
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The public URL must be known before the stack is built; reserve the
	// listener first.
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	st, err := openStack(ctx, cfg)
	if err != nil {
		t.Fatalf("open stack: %v", err)
	}
	if err := st.start(ctx); err != nil {
		st.Close()
		t.Fatalf("start stack: %v", err)
	}
	srv.Config.Handler = st.api.Handler()
	srv.Start()
	ts := &testStack{stack: st, URL: srv.URL, Dir: cfg.Ledger.DataDir, Logs: logs, srv: srv}
	t.Cleanup(ts.stop)
	return ts
}

// stop closes the HTTP server and the stack; safe to call twice.
func (ts *testStack) stop() {
	if ts.srv != nil {
		ts.api.EndLongPolls()
		ts.srv.Close()
		ts.srv = nil
		ts.stack.Close()
	}
}

// partner onboards a partner with one key and returns a client acting as it.
func (ts *testStack) partner(t testing.TB, origins ...string) (*apitest.Client, string) {
	t.Helper()
	if len(origins) == 0 {
		origins = []string{"https://partner.example"}
	}
	id, key, err := createPartner(context.Background(), ts.ledger, "Partner "+t.Name(), origins)
	if err != nil {
		t.Fatalf("create partner: %v", err)
	}
	ts.waitProjected(t)
	return &apitest.Client{TB: t, Base: ts.URL, Key: key.Secret}, id
}

// waitProjected waits until the projections hold everything in the ledger.
func (ts *testStack) waitProjected(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.projector.CatchUp(ctx); err != nil {
		t.Fatalf("projections catch up: %v", err)
	}
}
