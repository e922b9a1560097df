package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/sms"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// The helpers every end-to-end test shares live in files named for what they
// hold: a stack in this process (teststack_test.go), the real binary
// (binary_test.go), reading the ledger and producing partner events
// (ledger_test.go), a donor's browser without JavaScript (donorflow_test.go),
// webhook receivers and signatures (receiver_test.go), the metrics listener
// and promtool (scrape_test.go), and a load of partner writes while
// instances and nodes die (writeload_test.go).

// ---- A stack in this process ----

// testStack is a real instance for a test: embedded JetStream and bbolt in a
// temporary directory, the HTTP API on a random loopback port.
type testStack struct {
	*stack.Stack
	URL  string
	Dir  string
	Logs *syncBuffer
	srv  *httptest.Server
}

type stackOption func(*stack.Config)

func withEnv(env domain.Environment) stackOption {
	return func(c *stack.Config) {
		c.Ledger.Env = env
		if env == domain.Production {
			// Production refuses to start without its vendors. These point
			// nowhere; tests that use a vendor set their own (withSMS).
			c.Vendors = httpapi.VendorSecrets{Bank: []byte("prod-bank"), KYC: []byte("whsec_prod-kyc")}
			if c.Truv.Secret == "" {
				c.Truv = stack.TruvConfig{ClientID: "truv-prod", Secret: "prod-payroll", BaseURL: "http://127.0.0.1:1"}
			}
			if c.Stripe.SecretKey == "" {
				c.Stripe = stripeidentity.Config{SecretKey: "sk_live_nowhere", BaseURL: "http://127.0.0.1:1"}
			}
			if c.Increase.AccountID == "" {
				c.Increase = stack.IncreaseConfig{BaseURL: "http://127.0.0.1:1", APIKey: "prod-increase", AccountID: "account_prod"}
			}
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
	return func(c *stack.Config) { c.RateLimit = httpapi.RateLimit{PerSecond: perSecond, Burst: burst} }
}

func withDir(dir string) stackOption {
	return func(c *stack.Config) { c.Ledger.DataDir = dir }
}

func withClock(clock *testClock) stackOption {
	return func(c *stack.Config) { c.Now = clock.now }
}

// withNATSListen lets other processes (the CLI) reach the stack's embedded
// NATS server.
func withNATSListen(addr string) stackOption {
	return func(c *stack.Config) { c.Ledger.NATSListen = addr }
}

// withNATSURL runs the stack on an external NATS server instead of an
// embedded one.
func withNATSURL(url string) stackOption {
	return func(c *stack.Config) { c.Ledger.NATSURL = url }
}

// withPublicURL has the stack tell partners, donors and its simulators
// another address than its own listener's (a proxy in front of it).
func withPublicURL(url string) stackOption {
	return func(c *stack.Config) { c.PublicURL = url }
}

// withRequestLease caps how long a request may hold its Idempotency-Key.
func withRequestLease(d time.Duration) stackOption {
	return func(c *stack.Config) { c.RequestLease = d }
}

// withMasterKey sets the master key, which instances sharing a ledger share.
func withMasterKey(hex string) stackOption {
	return func(c *stack.Config) { c.MasterKey = hex }
}

// withWebhooks adjusts the dispatcher's configuration.
func withWebhooks(f func(*dispatcher.Config)) stackOption {
	return func(c *stack.Config) { f(&c.Webhooks) }
}

// withRetrySchedule compresses the retry schedule for a test.
func withRetrySchedule(waits ...time.Duration) stackOption {
	return withWebhooks(func(c *dispatcher.Config) { c.Schedule = waits })
}

// repeatWait is a schedule of n equal waits.
func repeatWait(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// startStack runs an instance with every background loop, as serve does.
func startStack(t testing.TB, opts ...stackOption) *testStack {
	t.Helper()
	ts := openStack(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ts.Start(ctx); err != nil {
		t.Fatalf("start stack: %v", err)
	}
	return ts
}

// openStack builds an instance and serves its API, but runs none of its
// background loops: its projections apply nothing unless the test runs the
// projector itself.
func openStack(t testing.TB, opts ...stackOption) *testStack {
	t.Helper()
	logs := &syncBuffer{}
	cfg := stack.Config{
		Ledger:    eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir()},
		RateLimit: httpapi.RateLimit{PerSecond: 10000, Burst: 10000},
		Log:       zerolog.New(logs),
		// Short phone keys, so that forgetting a donor waits two seconds
		// for the key to close, not a minute and a half. Settle stays long
		// enough for a session's append on a loaded machine: it bounds it.
		PhoneKeys: vault.PhoneKeyTimes{SealFor: 200 * time.Millisecond, Settle: 2 * time.Second},
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The public URL must be known before the stack is built; reserve the
	// listener first.
	srv := httptest.NewUnstartedServer(nil)
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	}
	st, err := stack.Open(ctx, cfg)
	if err != nil {
		srv.Close()
		t.Fatalf("open stack: %v", err)
	}
	srv.Config.Handler = st.API.Handler()
	srv.Start()
	ts := &testStack{Stack: st, URL: srv.URL, Dir: cfg.Ledger.DataDir, Logs: logs, srv: srv}
	t.Cleanup(ts.stop)
	return ts
}

// stop closes the HTTP server and the stack; safe to call twice.
func (ts *testStack) stop() {
	if ts.srv != nil {
		ts.API.EndLongPolls()
		ts.srv.Close()
		ts.srv = nil
		ts.Stack.Close()
	}
}

// partnerBrand is what donors see of a test partner: what production
// requires, so that one helper onboards partners on either stack. No logo:
// browser tests would see its failed load.
var partnerBrand = domain.Brand{SupportEmail: "help@partner.example", PrivacyURL: "https://partner.example/privacy", TermsURL: "https://partner.example/terms"}

// partner onboards a partner with one key and returns a client acting as it.
func (ts *testStack) partner(t testing.TB, origins ...string) (*apitest.Client, string) {
	t.Helper()
	if len(origins) == 0 {
		origins = []string{"https://partner.example"}
	}
	id, key, err := ts.Operators.CreatePartner(context.Background(), "Partner "+t.Name(), origins, partnerBrand)
	if err != nil {
		t.Fatalf("create partner: %v", err)
	}
	ts.waitProjected(t)
	return &apitest.Client{TB: t, Base: ts.URL, Key: key.Secret}, id
}

// feedPartner onboards a partner with a few imported churches and returns
// its client and its producer identity.
func (ts *testStack) feedPartner(t testing.TB, churches int) (*apitest.Client, feedProducer) {
	t.Helper()
	c, pid := ts.partner(t)
	rows := make([]string, churches)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"name":"Church %d"}`, i)
	}
	resp := c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows, ",")+`]}`, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("import churches: %d %s", resp.Status, resp.Body)
	}
	var imp importResponse
	resp.JSON(t, &imp)
	p := feedProducer{Partner: pid}
	for _, r := range imp.Results {
		p.Churches = append(p.Churches, r.Church.ID)
	}
	return c, p
}

// waitProjected waits until the projections hold everything in the ledger.
func (ts *testStack) waitProjected(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Projector.CatchUp(ctx); err != nil {
		t.Fatalf("projections catch up: %v", err)
	}
}

// lastSeq is the ledger's newest sequence.
func (ts *testStack) lastSeq(t *testing.T) uint64 {
	t.Helper()
	seq, err := ts.Ledger.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// testClock is the stack's clock in flow tests: real time plus an offset the
// test moves forward, so codes and urls expire without waiting.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

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

// waitFor polls until cond holds.
func waitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	eventlogtest.WaitFor(t, timeout, msg, cond)
}
