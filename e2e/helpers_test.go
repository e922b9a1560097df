package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/sms"
)

// The helpers every end-to-end test shares: a stack in this process, the
// real binary, producers of ledger events, a donor's browser without
// JavaScript, and a webhook receiver.

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

// ---- The binary ----

// Tests that run the real binary share one build, removed when the tests end.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// givingBinary builds cmd/giving once per test run.
func givingBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "giving-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "giving")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/partnergiving/giving/cmd/giving").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// cleanEnv is the test's environment without GIVING_* variables, plus env.
func cleanEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIVING_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// cliResult is a finished CLI run.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// runCLI runs the binary to completion with args and extra environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, givingBinary(t), args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("giving %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// server is a running "giving serve" process, or another long-running
// command (launchCommand).
type server struct {
	cmd    *exec.Cmd
	URL    string
	NATS   string // the --nats-listen address operator commands use
	Dir    string // the data directory, which holds the NATS token
	Stdout *syncBuffer
	Stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startServer runs "giving serve" on dataDir with loopback listeners on
// random ports and waits until it prints its addresses.
func startServer(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	s := launchServe(t, env, append([]string{"--data", dataDir, "--addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"}, args...)...)
	s.Dir = dataDir
	s.waitPrinted(t, "its NATS address", func(line string) bool {
		// The token never shows: "nats://xxxxx@127.0.0.1:port (token in ...)".
		_, url, ok := strings.Cut(line, "embedded NATS for operator commands: nats://xxxxx@")
		s.NATS, _, _ = strings.Cut(url, " ")
		return ok
	})
	return s
}

// launchServe runs "giving serve" with args alone and waits until it prints
// the address it serves at.
func launchServe(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return launchServeIn(t, "", env, args...)
}

// launchServeIn is launchServe in the working directory dir ("" for the
// test's own).
func launchServeIn(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	// A random metrics port unless the test says otherwise: the default one
	// is a single port, and several servers run at once.
	s := launchCommand(t, dir, append([]string{"GIVING_METRICS_ADDR=127.0.0.1:0"}, env...), append([]string{"serve"}, args...)...)
	s.waitPrinted(t, "its address", func(line string) bool {
		_, url, ok := strings.Cut(line, " stack listening on ")
		s.URL = strings.TrimSpace(url)
		return ok
	})
	return s
}

// launchCommand runs the binary with args in dir ("" for the test's own),
// collecting its output line by line, and kills it when the test ends.
func launchCommand(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(givingBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	s := &server{cmd: cmd, Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed once the process has exited and every line it
	// printed is in Stdout: a test that reads Stdout after a stop sees
	// all of it.
	collected := make(chan struct{})
	go func() {
		s.err = cmd.Wait()
		pw.Close()
		<-collected
		close(s.done)
	}()
	go func() {
		defer close(collected)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.Stdout.Write([]byte(sc.Text() + "\n"))
		}
		// A line too long for the scanner ends it: read on, so the
		// process is never stuck writing.
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

// waitPrinted waits until found accepts a line the server printed, and
// fails the test if the server exits first.
func (s *server) waitPrinted(t *testing.T, what string, found func(line string) bool) {
	t.Helper()
	waitFor(t, time.Minute, "giving "+s.cmd.Args[1]+" to print "+what, func() bool {
		select {
		case <-s.done:
			t.Fatalf("giving %s exited: %v\nstdout: %s\nstderr: %s", s.cmd.Args[1], s.err, s.Stdout, s.Stderr)
		default:
		}
		for _, line := range strings.Split(s.Stdout.String(), "\n") {
			if found(line) {
				return true
			}
		}
		return false
	})
}

// natsURL is the address, with the token, a test connects to the server's
// embedded NATS at.
func (s *server) natsURL(t *testing.T) string {
	t.Helper()
	token, err := eventlog.NATSToken(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return "nats://" + token + "@" + s.NATS
}

// kill stops the process at once, as a crash would.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// terminate sends SIGTERM and returns the exit code.
func (s *server) terminate(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatal("giving serve did not stop within a minute of SIGTERM")
	}
	return s.cmd.ProcessState.ExitCode()
}

// ---- The ledger: reading it, and producing partner events ----

// ledgerEvents reads every event of one type from the ledger.
func ledgerEvents(t *testing.T, l *eventlog.Ledger, eventType string) []domain.Event {
	t.Helper()
	var out []domain.Event
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().OfType(eventType), after, 500)
		if err != nil {
			t.Fatalf("read ledger: %v", err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			out = append(out, ev)
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}

// sessionEvents counts one session's events of one type.
func sessionEvents(t *testing.T, l *eventlog.Ledger, sessionID, eventType string) int {
	t.Helper()
	n := 0
	for _, ev := range ledgerEvents(t, l, eventType) {
		if ev.AggregateID == sessionID {
			n++
		}
	}
	return n
}

// imports returns every church.imported event of the partner, oldest first.
func imports(t *testing.T, l *eventlog.Ledger, partner string) []*domain.ChurchesImported {
	t.Helper()
	var out []*domain.ChurchesImported
	var after uint64
	for {
		recs, pending, err := l.Read(context.Background(), l.Subjects().Aggregate(partner, domain.ChurchCatalogue), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := ev.Payload.(*domain.ChurchesImported); ok {
				out = append(out, p)
			}
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return out
		}
	}
}

// Tests append public events the way the donor flow and the vendor edges
// do: through the command helper (eventlog.Execute) with the domain's
// decisions, without going through HTTP.

// createEnrollment appends enrollment.created for a new enrollment.
func createEnrollment(ctx context.Context, l *eventlog.Ledger, partner, church string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixEnrollment)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		e := domain.Fold[domain.Enrollment](h.Events)
		ev, err := domain.CreateEnrollment(&e, domain.NewEnrollment{
			ID: id, PartnerID: partner, ChurchID: church, SessionID: domain.NewID(domain.PrefixSession),
			Giving: domain.Giving{Mode: domain.ModePercent, Value: 2_50},
		}, time.Now())
		if err != nil {
			return nil, err
		}
		return &ev, nil
	})
}

// activateEnrollment appends enrollment.activated for an enrollment created
// by createEnrollment.
func activateEnrollment(ctx context.Context, l *eventlog.Ledger, partner, enrollment string) (eventlog.Record, error) {
	return execute(ctx, l, partner, enrollment, func(h eventlog.History) (*domain.Event, error) {
		e := domain.Fold[domain.Enrollment](h.Events)
		return domain.ActivateEnrollment(&e, time.Now())
	})
}

// receiveDeposit appends deposit.received for a new deposit.
func receiveDeposit(ctx context.Context, l *eventlog.Ledger, partner, church string, amount domain.Hundredths, trace string) (eventlog.Record, error) {
	id := domain.NewID(domain.PrefixDeposit)
	return execute(ctx, l, partner, id, func(h eventlog.History) (*domain.Event, error) {
		if len(h.Events) > 0 {
			return nil, domain.ProblemConflict.New("deposit %s already received", id)
		}
		now := time.Now()
		ev := domain.NewEvent(partner, id, church, now, &domain.DepositReceived{
			DepositID: id, Amount: amount, Currency: "USD", Trace: trace, BankTS: domain.FormatTime(now),
		})
		return &ev, nil
	})
}

func execute(ctx context.Context, l *eventlog.Ledger, partner, aggregate string, decide func(eventlog.History) (*domain.Event, error)) (eventlog.Record, error) {
	out, err := l.Execute(ctx, eventlog.Command{
		Partner: partner, Aggregate: aggregate,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) { return decide(h) },
	})
	if err != nil {
		return eventlog.Record{}, err
	}
	if out.Record == nil {
		return eventlog.Record{}, fmt.Errorf("%s/%s: nothing appended", partner, aggregate)
	}
	return *out.Record, nil
}

// appendEnrollment appends an enrollment.created event for partner, naming
// a church of no one, and returns the stored record, its event id and when
// the append began.
func appendEnrollment(t testing.TB, l *eventlog.Ledger, partner string) (eventlog.Record, string, time.Time) {
	t.Helper()
	start := time.Now()
	rec, err := createEnrollment(context.Background(), l, partner, domain.NewID(domain.PrefixChurch))
	if err != nil {
		t.Fatalf("append enrollment: %v", err)
	}
	ev, err := rec.Event()
	if err != nil {
		t.Fatalf("decode appended event: %v", err)
	}
	return rec, ev.ID, start
}

// feedProducer is one partner's identity for producing events: its id and
// the churches its events name.
type feedProducer struct {
	Partner  string
	Churches []string
}

// job kinds for produce: what one unit of work appends.
const (
	jobCreate         = iota // enrollment.created
	jobCreateActivate        // enrollment.created, then enrollment.activated
	jobDeposit               // deposit.received
)

type produceJob struct {
	who  feedProducer
	kind int
	n    int // the job's number, to vary churches and amounts
}

// produce runs jobs on parallel workers (synced JetStream appends are
// latency-bound, so concurrency is what makes thousands of them quick) and
// returns every appended record, in stream order.
func produce(ctx context.Context, l *eventlog.Ledger, jobs []produceJob, workers int) ([]eventlog.Record, error) {
	var (
		mu       sync.Mutex
		out      []eventlog.Record
		firstErr error
		wg       sync.WaitGroup
	)
	ch := make(chan produceJob)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				recs, err := runJob(ctx, l, j)
				mu.Lock()
				out = append(out, recs...)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	sort.Slice(out, func(i, k int) bool { return out[i].Seq < out[k].Seq })
	return out, firstErr
}

func runJob(ctx context.Context, l *eventlog.Ledger, j produceJob) ([]eventlog.Record, error) {
	church := j.who.Churches[j.n%len(j.who.Churches)]
	switch j.kind {
	case jobDeposit:
		rec, err := receiveDeposit(ctx, l, j.who.Partner, church, domain.Hundredths(100+j.n), fmt.Sprintf("trace-%d", j.n))
		return []eventlog.Record{rec}, err
	case jobCreate, jobCreateActivate:
		created, err := createEnrollment(ctx, l, j.who.Partner, church)
		if err != nil || j.kind == jobCreate {
			return []eventlog.Record{created}, err
		}
		activated, err := activateEnrollment(ctx, l, j.who.Partner, created.Aggregate)
		return []eventlog.Record{created, activated}, err
	}
	return nil, fmt.Errorf("unknown job kind %d", j.kind)
}

// ---- The hosted flow, in a browser without JavaScript ----

// openSession creates a donor session and returns it with its url.
func openSession(t *testing.T, c *apitest.Client, church, phone, mode, value, redirect string) sessionResponse {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, phone, mode, value, redirect), nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create session: %d %s", resp.Status, resp.Body)
	}
	var s sessionResponse
	resp.JSON(t, &s)
	return s
}

// waitSessionStatus polls the API until the session has status.
func waitSessionStatus(t *testing.T, c *apitest.Client, id, status string) sessionResponse {
	t.Helper()
	var s sessionResponse
	waitFor(t, 10*time.Second, "session "+id+" to become "+status, func() bool {
		c.Do(http.MethodGet, "/v1/donor_sessions/"+id, nil, nil).JSON(t, &s)
		return s.Status == status
	})
	return s
}

// donorBrowser is a browser without JavaScript: an HTTP client with a cookie
// jar that follows redirects, posting forms as a browser would.
type donorBrowser struct {
	t    *testing.T
	hc   *http.Client
	url  string
	page flowPage
}

// flowPage is one page the donor saw.
type flowPage struct {
	Status int
	URL    string
	Header http.Header
	Body   string
}

func newDonorBrowser(t *testing.T, flowURL string, rt http.RoundTripper) *donorBrowser {
	jar, _ := cookiejar.New(nil)
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &donorBrowser{t: t, hc: &http.Client{Jar: jar, Transport: rt, Timeout: 30 * time.Second}, url: flowURL}
}

func (d *donorBrowser) do(req *http.Request) flowPage {
	d.t.Helper()
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	d.page = flowPage{Status: resp.StatusCode, URL: resp.Request.URL.String(), Header: resp.Header, Body: string(body)}
	return d.page
}

// open loads the flow's url (or path under it).
func (d *donorBrowser) open(suffix string) flowPage {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.url+suffix, nil)
	return d.do(req)
}

// submit posts a form of the current page to the flow action, with the
// page's CSRF token unless form sets one.
func (d *donorBrowser) submit(action string, form url.Values) flowPage {
	d.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["csrf"]; !set {
		form.Set("csrf", d.page.csrf())
	}
	req, _ := http.NewRequest(http.MethodPost, d.url+"/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return d.do(req)
}

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	h1Element = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
)

func (p flowPage) csrf() string {
	m := csrfField.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

func (p flowPage) h1() string {
	m := h1Element.FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// expect fails unless the page has the status and heading.
func (p flowPage) expect(t *testing.T, status int, h1 string) {
	t.Helper()
	if p.Status != status || p.h1() != h1 {
		t.Fatalf("want %d %q, got %d %q at %s\n%s", status, h1, p.Status, p.h1(), p.URL, p.Body)
	}
}

// enrollByFlow opens a donor session and completes the hosted flow in a
// browser without JavaScript with a seed donor who passes identity
// verification, and returns the session, the enrollment it made and the
// donor's browser (bound to the session).
func enrollByFlow(t *testing.T, c *apitest.Client, church, mode, value string, rt http.RoundTripper) (sessionResponse, string, *donorBrowser) {
	t.Helper()
	s := openSession(t, c, church, "+12025550100", mode, value, "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, rt)
	d.open("")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"000000"}})
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
	d.submit("payroll", url.Values{"provider": {"acme_payroll"}, "username": {"user_good"}, "password": {"pass_good"}}).expect(t, http.StatusOK, "You're all set")
	done := waitSessionStatus(t, c, s.ID, "completed")
	return s, *done.EnrollmentID, d
}

// consentByFlow agrees, in a browser without JavaScript, to the higher
// value a consent url asks for, and returns the browser.
func consentByFlow(t *testing.T, consentURL string, rt http.RoundTripper) *donorBrowser {
	t.Helper()
	d := newDonorBrowser(t, consentURL, rt)
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	d.submit("code", nil)
	d.submit("verify", url.Values{"code": {"000000"}}).expect(t, http.StatusOK, "Agree to give")
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}).expect(t, http.StatusOK, "Your new amount is set")
	return d
}

// eventWatch follows one partner's events as an integration does: on a
// webhook receiver, on the feed and by id.
type eventWatch struct {
	ts      *testStack
	c       *apitest.Client
	hooks   *receiver
	partner string
	seen    map[string]bool
}

func watchEvents(t *testing.T, ts *testStack, c *apitest.Client, partner string) *eventWatch {
	t.Helper()
	hooks := okReceiver(t)
	createEndpoint(t, c, hooks.URL)
	return &eventWatch{ts: ts, c: c, hooks: hooks, partner: partner, seen: map[string]bool{}}
}

// expect waits for the next event of typ about subject (the payload's
// enrollment_id or donor_session_id) on the webhook receiver, checks that
// the feed item and GET /v1/events/{event_id} are the webhook's body byte
// for byte, and returns the payload.
func (w *eventWatch) expect(t *testing.T, typ, subject string) map[string]any {
	t.Helper()
	var got delivery
	var payload map[string]any
	waitFor(t, 15*time.Second, typ+" about "+subject+" on the webhook", func() bool {
		for _, d := range w.hooks.deliveries() {
			var env struct {
				Payload map[string]any `json:"payload"`
			}
			_ = json.Unmarshal(d.Body, &env)
			if d.EventType == typ && !w.seen[d.EventID] && (env.Payload["enrollment_id"] == subject || env.Payload["donor_session_id"] == subject) {
				got, payload = d, env.Payload
				return true
			}
		}
		return false
	})
	w.seen[got.EventID] = true
	feed := w.c.Do(http.MethodGet, "/v1/events?limit=1000&type="+typ, nil, nil)
	var page eventPage
	feed.JSON(t, &page)
	found := false
	for _, item := range page.Data {
		if decodeEnvelope(t, item).EventID == got.EventID {
			found = true
			if !bytes.Equal(item, got.Body) {
				t.Fatalf("%s: feed item\n%s\nwebhook body\n%s", typ, item, got.Body)
			}
		}
	}
	if !found {
		t.Fatalf("%s %s is not on the feed", typ, got.EventID)
	}
	one := w.c.Do(http.MethodGet, "/v1/events/"+got.EventID, nil, nil)
	if one.Status != http.StatusOK || !bytes.Equal(one.Body, got.Body) {
		t.Fatalf("GET /v1/events/%s: %d\n%s\nwant\n%s", got.EventID, one.Status, one.Body, got.Body)
	}
	return payload
}

// appended counts the ledger's events about one aggregate of the partner,
// internal ones included: a repeated move must not add any.
func (w *eventWatch) appended(t *testing.T, aggregate string) int {
	t.Helper()
	recs, _, err := w.ts.Ledger.Read(context.Background(), w.ts.Ledger.Subjects().Aggregate(w.partner, aggregate), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// recorder keeps every response body a client received, for the PII sweep.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	next   http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, req.Method+" "+req.URL.Path+" → "+resp.Status+"\n"+headerText(resp.Header)+"\n"+string(body))
	r.mu.Unlock()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp, nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func headerText(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	return b.String()
}

// ---- Webhooks: endpoints, a receiver, the spec's signature check ----

// endpoint is a created webhook endpoint as the test sees it.
type endpoint struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

func createEndpoint(t *testing.T, c *apitest.Client, url string, types ...string) endpoint {
	t.Helper()
	if len(types) == 0 {
		types = []string{"*"}
	}
	resp := c.Do(http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": url, "event_types": types}, nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create endpoint %s: %d %s", url, resp.Status, resp.Body)
	}
	var ep endpoint
	resp.JSON(t, &ep)
	return ep
}

// attemptView is a delivery attempt as the API lists it.
type attemptView struct {
	ID            string  `json:"id"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	StatusCode    *int    `json:"status_code"`
	DurationMS    int64   `json:"duration_ms"`
	AttemptedAt   string  `json:"attempted_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	Exhausted     bool    `json:"exhausted"`
	Error         *string `json:"error"`
}

func attempts(t *testing.T, c *apitest.Client, endpointID string) []attemptView {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/webhook_endpoints/"+endpointID+"/deliveries", nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("deliveries of %s: %d %s", endpointID, resp.Status, resp.Body)
	}
	var page struct {
		Data []attemptView `json:"data"`
	}
	resp.JSON(t, &page)
	return page.Data
}

// delivery is one request a receiver got.
type delivery struct {
	Body        []byte
	Signature   string
	ContentType string
	UserAgent   string
	At          time.Time
	EventID     string
	EventType   string
	// Status is what the receiver answered; 0 while it hangs.
	Status int
	// Header is every header of the request.
	Header http.Header
}

// receiver is a real HTTP server on loopback that records every request and
// answers as respond says: a status, or 0 to hang until the sender gives up.
// Every event it receives is checked against its type's published payload
// schema (GET /v1/event_types); a mismatch fails the test when it ends.
type receiver struct {
	srv     *httptest.Server
	URL     string
	mu      sync.Mutex
	got     []delivery
	invalid []error
	respond func(n int, r *http.Request, w http.ResponseWriter) int
	release chan struct{}
}

func newReceiver(t *testing.T, respond func(n int, r *http.Request, w http.ResponseWriter) int) *receiver {
	t.Helper()
	return newReceiverOn(t, nil, respond)
}

// newReceiverOn serves on ln, or on a fresh loopback port when ln is nil.
func newReceiverOn(t *testing.T, ln net.Listener, respond func(n int, r *http.Request, w http.ResponseWriter) int) *receiver {
	t.Helper()
	rc := &receiver{respond: respond, release: make(chan struct{})}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	if ln != nil {
		rc.srv.Listener.Close()
		rc.srv.Listener = ln
	}
	rc.srv.Start()
	rc.URL = rc.srv.URL + "/hooks"
	t.Cleanup(rc.close)
	t.Cleanup(func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, err := range rc.invalid {
			t.Errorf("webhook receiver: %v", err)
		}
	})
	return rc
}

// okReceiver answers 200 to everything.
func okReceiver(t *testing.T) *receiver {
	return newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusOK })
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{Body: body, Signature: r.Header.Get("Service-Signature"), ContentType: r.Header.Get("Content-Type"), UserAgent: r.Header.Get("User-Agent"), At: time.Now(), Header: r.Header.Clone()}
	var env struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(body, &env)
	d.EventID, d.EventType = env.EventID, env.EventType
	var invalid error
	if env.EventType != domain.WebhookTestEventType {
		invalid = apitest.ValidateEvent(body)
	}
	rc.mu.Lock()
	if invalid != nil {
		rc.invalid = append(rc.invalid, invalid)
	}
	rc.got = append(rc.got, d)
	n := len(rc.got)
	rc.mu.Unlock()
	status := rc.respond(n, r, w)
	rc.mu.Lock()
	rc.got[n-1].Status = status
	rc.mu.Unlock()
	if status == 0 {
		select {
		case <-r.Context().Done():
		case <-rc.release:
		}
		return
	}
	w.WriteHeader(status)
}

func (rc *receiver) close() {
	select {
	case <-rc.release:
	default:
		close(rc.release)
	}
	rc.srv.Close()
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// accepted reports which event ids were answered 2xx.
func (rc *receiver) accepted() map[string]bool {
	out := map[string]bool{}
	for _, d := range rc.deliveries() {
		if d.Status/100 == 2 {
			out[d.EventID] = true
		}
	}
	return out
}

// received reports how many times each event id arrived.
func (rc *receiver) received() map[string]int {
	out := map[string]int{}
	for _, d := range rc.deliveries() {
		out[d.EventID]++
	}
	return out
}

// verifyAll checks every delivery the receiver got against secret, with
// both signature schemes, and the headers every delivery carries.
func (rc *receiver) verifyAll(t *testing.T, secret string) {
	t.Helper()
	for i, d := range rc.deliveries() {
		if err := verifySignature(secret, d.Signature, d.Body, d.At); err != nil {
			t.Errorf("delivery %d (%s): %v", i, d.EventID, err)
		}
		if err := verifyStandard(secret, d.Header, d.Body); err != nil {
			t.Errorf("delivery %d (%s): Standard Webhooks: %v", i, d.EventID, err)
		}
		if d.Header.Get("webhook-id") != d.EventID {
			t.Errorf("delivery %d: webhook-id %q, want the event_id %q", i, d.Header.Get("webhook-id"), d.EventID)
		}
		if n, err := strconv.Atoi(d.Header.Get("Service-Webhook-Attempt")); err != nil || n < 1 {
			t.Errorf("delivery %d: Service-Webhook-Attempt %q", i, d.Header.Get("Service-Webhook-Attempt"))
		}
		if d.ContentType != "application/json" {
			t.Errorf("delivery %d: Content-Type %q", i, d.ContentType)
		}
		if d.UserAgent != domain.WebhookUserAgent {
			t.Errorf("delivery %d: User-Agent %q", i, d.UserAgent)
		}
	}
	verifyStandardJS(t, secret, rc.deliveries())
}

// standardWebhooksJS is the pinned official JavaScript library of Standard
// Webhooks and its verifying script.
const standardWebhooksJS = "../tools/standardwebhooks"

// verifyStandardJS verifies deliveries with the official JavaScript library
// too (tools/standardwebhooks/verify.js under node). Without it installed
// the check is left out, unless GIVING_REQUIRE_BROWSER=1 (CI).
func verifyStandardJS(t *testing.T, secret string, ds []delivery) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(standardWebhooksJS, "node_modules", "standardwebhooks"))
	}
	if err != nil {
		if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GIVING_REQUIRE_BROWSER=1 but node or standardwebhooks is missing (cd tools/standardwebhooks && npm ci): %v", err)
		}
		return
	}
	type item struct {
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	items := make([]item, len(ds))
	for i, d := range ds {
		items[i] = item{Secret: secret, Body: string(d.Body), Headers: map[string]string{
			"webhook-id": d.Header.Get("webhook-id"), "webhook-timestamp": d.Header.Get("webhook-timestamp"),
			"webhook-signature": d.Header.Get("webhook-signature"),
		}}
	}
	data, _ := json.Marshal(items)
	file := filepath.Join(t.TempDir(), "deliveries.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, filepath.Join(standardWebhooksJS, "verify.js"), file).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("verified %d", len(ds)) {
		t.Errorf("the Standard Webhooks JavaScript library refused a delivery: %v: %s", err, out)
	}
}

// signaturePattern is the spec's header format.
var signaturePattern = regexp.MustCompile(`^t=([0-9]+),v1=([0-9a-f]{64})$`)

// verifySignature is a receiver's check, written from the spec's four rules
// and independent of the service's signer: the header's pattern, a
// timestamp within 300 seconds of now, HMAC-SHA256 over "<t>.<raw body>"
// keyed with the secret, compared in constant time.
func verifySignature(secret, header string, body []byte, now time.Time) error {
	m := signaturePattern.FindStringSubmatch(header)
	if m == nil {
		return fmt.Errorf("header %q does not match t=<digits>,v1=<64 lowercase hex>", header)
	}
	ts, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %w", m[1], err)
	}
	if diff := now.Unix() - ts; diff > 300 || diff < -300 {
		return fmt.Errorf("timestamp %d is %ds from now", ts, diff)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(m[1] + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	got, _ := hex.DecodeString(m[2])
	if !hmac.Equal(got, want) {
		return errors.New("signature does not match")
	}
	return nil
}

// verifyStandard checks the Standard Webhooks headers with the official Go
// library of standardwebhooks.com, which knows nothing of the service's
// signer: webhook-id, webhook-timestamp within five minutes, and a
// webhook-signature keyed with the base64 decoding of the whsec_ secret.
func verifyStandard(secret string, h http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(body, h)
}

// hosts is a fixed resolver, standing in for DNS so that tests can name
// hosts that resolve where they need. Its table can be changed while the
// stack runs, to play a DNS rebinding.
type hosts struct {
	mu    sync.Mutex
	table map[string][]netip.Addr
}

func newHosts(entries map[string]string) *hosts {
	h := &hosts{table: map[string][]netip.Addr{}}
	for name, addrs := range entries {
		h.set(name, addrs)
	}
	return h
}

func (h *hosts) set(name string, addrs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	h.table[name] = out
}

func (h *hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if addrs, ok := h.table[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// ---- Operating: the metrics listener, promtool ----

// promtoolPath finds Prometheus's promtool or ends the test: it skips,
// unless GIVING_REQUIRE_BROWSER=1 (CI), where a missing promtool fails like
// a missing browser (apt-get install prometheus).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("promtool"); err == nil {
		return path
	}
	if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
		t.Fatal("GIVING_REQUIRE_BROWSER=1 but promtool is not installed (apt-get install prometheus)")
	}
	t.Skip("promtool is not installed; skipping (set GIVING_REQUIRE_BROWSER=1 to fail instead)")
	return ""
}

// promtool runs promtool with args (and stdin, when not empty) and returns
// its combined output, failing the test unless it exits 0.
func promtool(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtoolPath(t), args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// metricsURL waits until serve prints the address of its metrics listener.
func (s *server) metricsURL(t *testing.T) string {
	t.Helper()
	var url string
	s.waitPrinted(t, "its metrics address", func(line string) bool {
		_, u, ok := strings.Cut(line, "metrics for Prometheus on ")
		url = strings.TrimSpace(u)
		return ok
	})
	return url
}

// partner onboards a partner through the CLI against the running server
// and returns a client acting as it, with its id.
func (s *server) partner(t *testing.T, origin string) (*apitest.Client, string) {
	t.Helper()
	p := decodeCLI(t, runCLI(t, []string{"GIVING_NATS_LISTEN=" + s.NATS, "GIVING_DATA=" + s.Dir},
		"partners", "create", "--name", "Partner "+t.Name(), "--redirect-origin", origin, "--json"))
	waitStatus(t, s.URL, p.APIKey, http.StatusOK)
	return &apitest.Client{TB: t, Base: s.URL, Key: p.APIKey}, p.PartnerID
}

// scrape is one read of a /metrics endpoint: the text as served and its
// families, parsed by Prometheus's own text parser.
type scrape struct {
	Text     string
	Families map[string]*dto.MetricFamily
}

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", url, resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: %v\n%s", url, err, body)
	}
	return scrape{Text: string(body), Families: fams}
}

// value sums the samples of family name whose labels include labels: a
// counter's or gauge's value, a histogram's count. ok is false when the
// family or no such sample exists.
func (s scrape) value(name string, labels map[string]string) (v float64, ok bool) {
	fam, found := s.Families[name]
	if !found {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v, ok
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// ---- A load of partner writes while instances and nodes die ----

// freeAddr is a loopback address that was free a moment ago, for a server
// that must come back where it was after a crash.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// loadPartner is a partner the write load acts as, with one church of its
// own for sessions and deposits, and enrollments for the load to move.
type loadPartner struct {
	ID, APIKey, Church, Origin string
	Moves                      []enrollmentMove
}

// enrollmentMove is one move the load makes on an enrollment of its own:
// update (to a lower value, so it applies at once), pause, resume or cancel.
type enrollmentMove struct {
	Kind, EnrollmentID string
}

// moveKinds are the enrollment moves of the load, and the event each one
// appends.
var moveKinds = map[string]string{"update": "enrollment.updated", "pause": "enrollment.paused", "resume": "enrollment.resumed", "cancel": "enrollment.canceled"}

// movableEnrollments makes n enrollments of the partner's church for each
// move kind, each in a status that allows its move (active; paused for a
// resume), through the ledger l.
func movableEnrollments(t *testing.T, l *eventlog.Ledger, p loadPartner, n int) []enrollmentMove {
	t.Helper()
	ctx := context.Background()
	var out []enrollmentMove
	for range n {
		for _, kind := range []string{"update", "pause", "resume", "cancel"} {
			rec, err := createEnrollment(ctx, l, p.ID, p.Church)
			if err == nil {
				_, err = activateEnrollment(ctx, l, p.ID, rec.Aggregate)
			}
			if err == nil && kind == "resume" {
				_, err = execute(ctx, l, p.ID, rec.Aggregate, func(h eventlog.History) (*domain.Event, error) {
					e := domain.Fold[domain.Enrollment](h.Events)
					return domain.PauseEnrollment(&e, time.Now())
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, enrollmentMove{Kind: kind, EnrollmentID: rec.Aggregate})
		}
	}
	return out
}

// writeJob is one partner write of the load, identified by its key.
type writeJob struct {
	kind    string // import, session, endpoint or deposit
	partner loadPartner
	key     string
	path    string
	body    []byte
	// status and answer are the final answer; lost counts the answers lost
	// before it (a connection error or a 5xx); err is set when none came.
	status int
	answer []byte
	lost   int
	err    error
}

// writeKinds are the load's writes, and the status each answers when done
// (or 200, replayed).
var writeKinds = map[string]int{"import": http.StatusOK, "session": http.StatusCreated, "endpoint": http.StatusCreated, "deposit": http.StatusOK,
	"update": http.StatusOK, "pause": http.StatusOK, "resume": http.StatusOK, "cancel": http.StatusOK}

// writeLoad makes n writes per partner, mixed: imports, donor sessions and
// deposit simulations in turn, every eighth a webhook endpoint (at most
// twelve per partner, under the endpoint limit) pointing at receiver, and
// every fifth, while the partner has some, one of its enrollment moves.
func writeLoad(partners []loadPartner, n int, prefix, receiver string) []*writeJob {
	var jobs []*writeJob
	for pi, p := range partners {
		endpoints, moves := 0, p.Moves
		for i := range n {
			key := fmt.Sprintf("%s-%d-%04d", prefix, pi, i)
			j := &writeJob{partner: p, key: key}
			switch {
			case i%5 == 4 && len(moves) > 0:
				m := moves[0]
				moves = moves[1:]
				j.kind, j.path = m.Kind, "/v1/enrollments/"+m.EnrollmentID+"/"+m.Kind
				switch m.Kind {
				case "update":
					j.body = []byte(`{"value":1.25}`)
				case "cancel":
					j.body = fmt.Appendf(nil, `{"reason":"Asked to stop (%s)."}`, key)
				}
			case i%8 == 7 && endpoints < 12:
				endpoints++
				j.kind, j.path = "endpoint", "/v1/webhook_endpoints"
				j.body = fmt.Appendf(nil, `{"url":%q,"event_types":["enrollment.ended"]}`, receiver+"/"+key)
			case i%3 == 0:
				j.kind, j.path = "import", importPath
				j.body = fmt.Appendf(nil, `{"churches":[{"name":"Church %s","external_id":%q},{"name":""}]}`, key, key)
			case i%3 == 1:
				j.kind, j.path = "session", "/v1/donor_sessions"
				j.body = []byte(sessionBody(p.Church, fmt.Sprintf("+1202555%04d", i), "pct", "5", p.Origin+"/done"))
			default:
				j.kind, j.path = "deposit", "/sandbox/simulate/deposit"
				j.body = fmt.Appendf(nil, `{"church_id":%q,"account_ref":"acct_%d","amount":%d.25}`, p.Church, i%5, 1+i%40)
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// send posts the write once to base.
func (j *writeJob) send(client *http.Client, base string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, base+j.path, bytes.NewReader(j.body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+j.partner.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", j.key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, body, resp.Header, nil
}

// chaosLoad runs write jobs with workers, each job against whichever
// instance targets names at the time, until every job has a final answer:
// a lost answer (connection error or 5xx) is retried with the same key
// against any instance, a 409 (the key still running) after Retry-After.
type chaosLoad struct {
	jobs    []*writeJob
	targets func() []string
	// answered counts final answers, replayed those of them that were
	// replays (a retry answered from the key's record or its recalled
	// effect); sent counts requests, lost the answers lost.
	answered, replayed, sent, lost atomic.Int64
	done                           chan struct{}
}

func runChaosLoad(jobs []*writeJob, workers int, targets func() []string) *chaosLoad {
	l := &chaosLoad{jobs: jobs, targets: targets, done: make(chan struct{})}
	queue := make(chan *writeJob)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: time.Minute}
			for j := range queue {
				l.finish(client, j)
			}
		}()
	}
	go func() {
		for _, j := range jobs {
			queue <- j
		}
		close(queue)
		wg.Wait()
		close(l.done)
	}()
	return l
}

func (l *chaosLoad) finish(client *http.Client, j *writeJob) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		targets := l.targets()
		if len(targets) == 0 {
			time.Sleep(50 * time.Millisecond) // every instance is down: wait for one
			continue
		}
		l.sent.Add(1)
		status, body, h, err := j.send(client, targets[rand.N(len(targets))])
		switch {
		case err != nil || status >= 500:
			j.lost++
			l.lost.Add(1)
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs*1000, 100)) * time.Millisecond)
		case status == http.StatusConflict && h.Get("Retry-After") != "":
			secs, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(secs, 1)) * time.Second)
		default:
			j.status, j.answer = status, body
			if h.Get("Idempotent-Replayed") == "true" {
				l.replayed.Add(1)
			}
			l.answered.Add(1)
			return
		}
	}
	j.err = fmt.Errorf("%s %s: no final answer within 3 minutes", j.kind, j.key)
}

// wait waits until every job has its final answer.
func (l *chaosLoad) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the load did not finish within 5 minutes")
	}
}

// checkWrites asserts what the load's partners were promised: every job got
// its kind's success answer; every re-send of a key replays that answer
// byte for byte; what was acknowledged reads back the same; and the ledger
// (read through l) holds exactly one effect per key. It returns the effects
// counted per kind.
func checkWrites(t *testing.T, base string, l *eventlog.Ledger, jobs []*writeJob) map[string]int {
	t.Helper()
	client := &http.Client{Timeout: time.Minute}
	answered := map[string]string{} // the id each key's answer names
	for _, j := range jobs {
		if j.err != nil {
			t.Fatal(j.err)
		}
		if j.status != writeKinds[j.kind] && j.status != http.StatusOK { // a replay is 200
			t.Fatalf("%s %s: final answer %d %s", j.kind, j.key, j.status, j.answer)
		}
		status, body, h, err := j.send(client, base)
		if err != nil || status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, j.answer) {
			t.Fatalf("%s %s: re-send answered %d replayed=%q (%v)\n%s\nwant\n%s", j.kind, j.key, status, h.Get("Idempotent-Replayed"), err, body, j.answer)
		}
		answered[j.key] = checkReadBack(t, client, base, j)
	}
	effects := map[string]int{}
	perKey := map[string]int{}
	for _, j := range jobs {
		perKey[j.key] = 0
	}
	byID := map[string][]string{} // id → keys answering it
	for k, id := range answered {
		byID[id] = append(byID[id], k)
	}
	count := func(kind, id string) {
		keys := byID[id]
		if len(keys) == 0 {
			t.Fatalf("the ledger holds a %s (%s) no key's answer names: a second effect", kind, id)
		}
		perKey[keys[0]]++
		effects[kind]++
	}
	for _, ev := range ledgerEvents(t, l, "church.imported") {
		for _, c := range ev.Payload.(*domain.ChurchesImported).Created {
			if c.ExternalID != nil && byID[*c.ExternalID] != nil {
				perKey[*c.ExternalID]++
				effects["import"]++
			}
		}
	}
	for _, ev := range ledgerEvents(t, l, "donor_session.created") {
		if byID[ev.AggregateID] != nil || strings.HasPrefix(ev.AggregateID, "ds_") {
			count("session", ev.AggregateID)
		}
	}
	for _, ev := range ledgerEvents(t, l, "webhook_endpoint.created") {
		count("endpoint", ev.AggregateID)
	}
	for _, ev := range ledgerEvents(t, l, "deposit.received") {
		count("deposit", ev.Payload.(*domain.DepositReceived).Trace)
	}
	moved := map[string]string{} // enrollment → the move the load made on it
	for _, j := range jobs {
		if _, ok := moveKinds[j.kind]; ok {
			moved[strings.Split(j.path, "/")[3]] = j.kind
		}
	}
	for kind, eventType := range moveKinds {
		for _, ev := range ledgerEvents(t, l, eventType) {
			if moved[ev.AggregateID] == kind {
				count(kind, ev.AggregateID)
			}
		}
	}
	for _, j := range jobs {
		if perKey[j.key] != 1 {
			t.Fatalf("%s %s: %d effects in the ledger, want exactly 1", j.kind, j.key, perKey[j.key])
		}
	}
	return effects
}

// checkReadBack reads an acknowledged write back and compares it with the
// answer; it returns the id the answer names (for an import, the key, which
// is the church's external id; for a deposit, its trace).
func checkReadBack(t *testing.T, client *http.Client, base string, j *writeJob) string {
	t.Helper()
	var answer map[string]any
	if err := json.Unmarshal(j.answer, &answer); err != nil {
		t.Fatalf("%s %s: %v", j.kind, j.key, err)
	}
	var id, path string
	var want map[string]any
	switch j.kind {
	case "import":
		want = answer["results"].([]any)[0].(map[string]any)["church"].(map[string]any)
		id, path = j.key, "/v1/churches/"+want["id"].(string)
	case "session":
		want, id = answer, answer["id"].(string)
		path = "/v1/donor_sessions/" + id
	case "endpoint":
		want, id = answer, answer["id"].(string)
		path = "/v1/webhook_endpoints/" + id
	case "update", "pause", "resume", "cancel":
		want, id = answer, answer["enrollment_id"].(string)
		path = "/v1/enrollments/" + id
	case "deposit":
		sim := answer["simulated"].(map[string]any)
		if answer["status_code"].(float64) != 200 {
			t.Fatalf("deposit %s: the edge answered %s", j.key, j.answer)
		}
		return sim["trace"].(string)
	}
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+j.partner.APIKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: read back %s: %d %v", j.kind, j.key, path, resp.StatusCode, err)
	}
	for k, v := range got {
		if w, ok := want[k]; ok && !reflect.DeepEqual(v, w) {
			t.Fatalf("%s %s: %s reads %v, answered %v", j.kind, j.key, k, v, w)
		}
	}
	return id
}

// donorPhone reads the phone of a session's donor from the vault, as the
// hosted flow does.
func donorPhone(t *testing.T, ts *testStack, partner, sessionID string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Projector.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	sess, ok, err := ts.Store.Session(partner, sessionID)
	if err != nil || !ok {
		t.Fatalf("session %s: %v, %v", sessionID, ok, err)
	}
	vault, err := vault.Open(ctx, ts.Ledger, ts.Secrets, vault.PhoneKeyTimes{})
	if err != nil {
		t.Fatal(err)
	}
	return vault.Phone(ctx, sess.DonorID, sess.Phone)
}
