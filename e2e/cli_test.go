package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/projections"
)

type createdPartner struct {
	PartnerID string `json:"partner_id"`
	APIKey    string `json:"api_key"`
	KeyPrefix string `json:"key_prefix"`
}

func decodeCLI(t *testing.T, r cliResult) createdPartner {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	var out createdPartner
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, r.Stdout)
	}
	return out
}

// waitStatus polls GET /v1/churches with key until it answers status: the
// running instance applies operator commands through its projector.
func waitStatus(t *testing.T, base, key string, status int) {
	t.Helper()
	c := &apitest.Client{TB: t, Base: base, Key: key}
	waitFor(t, 10*time.Second, "key to answer "+http.StatusText(status), func() bool {
		return c.Do(http.MethodGet, "/v1/churches", nil, nil).Status == status
	})
}

// offline is how a test points the CLI at a data directory with no server:
// nothing holds the directory, so the CLI opens it itself.
func offline(dir string) []string {
	return []string{"GIVING_DATA=" + dir}
}

func TestCLIOfflineThenServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Flags from the environment: GIVING_DATA.
	p := decodeCLI(t, runCLI(t, offline(dir), "partners", "create", "--name", "Offline Partner", "--redirect-origin", "https://a.example", "--redirect-origin", "https://b.example:8443", "--json"))
	if !domain.ValidID(domain.PrefixPartner, p.PartnerID) || !domain.WellFormedKey(domain.Sandbox, p.APIKey) {
		t.Fatalf("created %+v", p)
	}
	second := decodeCLI(t, runCLI(t, offline(dir), "keys", "issue", "--partner", p.PartnerID, "--json"))
	third := decodeCLI(t, runCLI(t, offline(dir), "keys", "issue", "--partner", p.PartnerID, "--json"))
	if second.APIKey == p.APIKey || !strings.HasPrefix(second.APIKey, second.KeyPrefix) || second.PartnerID != p.PartnerID {
		t.Fatalf("issued %+v", second)
	}
	r := runCLI(t, offline(dir), "keys", "revoke", "--key-prefix", third.KeyPrefix)
	if r.Code != 0 || !strings.Contains(r.Stdout, "revoked "+third.KeyPrefix) || !strings.Contains(r.Stderr, "via data directory") {
		t.Fatalf("revoke: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	// Human output shows the key once, with a warning.
	human := runCLI(t, offline(dir), "keys", "issue", "--partner", p.PartnerID)
	if human.Code != 0 || !regexp.MustCompile(`api_key: sk_test_[0-9A-Za-z]{32}`).MatchString(human.Stdout) || !strings.Contains(human.Stdout, "shown once") {
		t.Fatalf("human output: %q", human.Stdout)
	}
	// The keys are stored only as hashes.
	if leaked := grepDir(t, dir, p.APIKey); leaked != "" {
		t.Fatalf("the key's secret is stored in %s", leaked)
	}

	srv := startServer(t, dir, nil)
	waitStatus(t, srv.URL, p.APIKey, 200)
	waitStatus(t, srv.URL, second.APIKey, 200)
	waitStatus(t, srv.URL, third.APIKey, 401)
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\n%s", code, srv.Stderr)
	}
	if !strings.Contains(srv.Stderr.String(), "shutting down") {
		t.Fatalf("no shutdown log: %s", srv.Stderr)
	}
	// A clean stop leaves the directory usable by the next process.
	if r := runCLI(t, offline(dir), "keys", "issue", "--partner", p.PartnerID, "--json"); r.Code != 0 {
		t.Fatalf("offline after stop: %d %s", r.Code, r.Stderr)
	}
}

func TestCLIOnlineAgainstRunningServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, nil)
	// The CLI reaches the running server at the address it recorded in its
	// data directory, with the NATS token from there.
	online := []string{"GIVING_DATA=" + dir}

	r := runCLI(t, online, "partners", "create", "--name", "Online Partner", "--redirect-origin", "https://a.example")
	if r.Code != 0 || !strings.Contains(r.Stderr, "via running instance at nats://"+srv.NATS) {
		t.Fatalf("create online: %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	m := regexp.MustCompile(`partner_id: (pt_\w+)\napi_key:\s+(sk_test_\w+)`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("create output %q", r.Stdout)
	}
	pid, key := m[1], m[2]
	waitStatus(t, srv.URL, key, 200)

	issued := decodeCLI(t, runCLI(t, online, "keys", "issue", "--partner", pid, "--json"))
	waitStatus(t, srv.URL, issued.APIKey, 200)
	r = runCLI(t, online, "keys", "revoke", "--key-prefix", issued.KeyPrefix)
	if r.Code != 0 {
		t.Fatalf("revoke online: %d %s", r.Code, r.Stderr)
	}
	waitStatus(t, srv.URL, issued.APIKey, 401)
	waitStatus(t, srv.URL, key, 200)

	// Refusals are usage or not-found errors, not crashes.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"keys", "revoke", "--key-prefix", issued.KeyPrefix}, 1, "already revoked"},
		{[]string{"keys", "revoke", "--key-prefix", "sk_test_nothere0"}, 1, "No key with prefix"},
		{[]string{"keys", "issue", "--partner", "pt_nope"}, 1, "No partner"},
		{[]string{"keys", "issue"}, 2, "--partner is required"},
		{[]string{"partners", "create", "--redirect-origin", "https://a.example"}, 2, "--name is required"},
		{[]string{"partners", "create", "--name", "X", "--redirect-origin", "http://insecure.example"}, 1, "https origin"},
		{[]string{"partners"}, 2, "usage"},
		{[]string{"nonsense"}, 2, "unknown command"},
	} {
		r := runCLI(t, online, tc.args...)
		if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("giving %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), r.Code, r.Stderr, tc.code, tc.want)
		}
	}
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM", code)
	}
}

// Two instances on one machine: the CLI reaches the one whose data
// directory it is given, whoever else listens where. A killed instance's
// record is ignored (its lock died with it), a directory in use cannot be
// served twice, and an instance that takes no operator commands is named.
func TestCLIFindsTheInstanceFromItsDataDirectory(t *testing.T) {
	t.Parallel()
	first, second := startServer(t, t.TempDir(), nil), startServer(t, t.TempDir(), nil)
	r := runCLI(t, nil, "partners", "create", "--name", "Second's", "--redirect-origin", "https://s.example", "--data", second.Dir, "--json")
	p := decodeCLI(t, r)
	if !strings.Contains(r.Stderr, "via running instance at nats://"+second.NATS) {
		t.Fatalf("the CLI did not say it used the second instance: %s", r.Stderr)
	}
	waitStatus(t, second.URL, p.APIKey, 200)
	waitStatus(t, first.URL, p.APIKey, 401)

	// The second directory is in use: a second serve on it is refused.
	if r := runCLI(t, nil, "serve", "--data", second.Dir, "--addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"); r.Code != 1 || !strings.Contains(r.Stderr, "in use by another process") || !strings.Contains(r.Stderr, "operator commands at nats://"+second.NATS) {
		t.Fatalf("serve on a directory in use: exit %d %s", r.Code, r.Stderr)
	}

	// Killed, it leaves its record behind; the lock went with it, so the CLI
	// opens the directory itself.
	second.kill()
	if _, err := os.Stat(filepath.Join(second.Dir, eventlog.InstanceFile)); err != nil {
		t.Fatalf("the killed instance's record: %v", err)
	}
	r = runCLI(t, nil, "keys", "issue", "--partner", p.PartnerID, "--data", second.Dir, "--json")
	if decodeCLI(t, r); !strings.Contains(r.Stderr, "via data directory "+second.Dir) {
		t.Fatalf("after the kill: %s", r.Stderr)
	}
	// A clean stop removes the record.
	if code := first.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(first.Dir, eventlog.InstanceFile)); !os.IsNotExist(err) {
		t.Fatalf("a stopped instance left its record: %v", err)
	}

	// An instance with no operator listener holds the directory; the CLI
	// says so instead of failing obscurely.
	launchServe(t, nil, "--data", first.Dir, "--addr", "127.0.0.1:0", "--nats-listen", "")
	r = runCLI(t, nil, "keys", "issue", "--partner", p.PartnerID, "--data", first.Dir)
	if r.Code != 1 || !strings.Contains(r.Stderr, "takes no operator commands") || !strings.Contains(r.Stderr, "--nats-listen") {
		t.Fatalf("against an instance without a listener: exit %d %s", r.Code, r.Stderr)
	}
}

func TestCLIEnvironmentAndProductionKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A production partner needs a support contact, privacy and terms
	// pages; their flags come from the environment too.
	env := append(offline(dir), "GIVING_ENV=production",
		"GIVING_SUPPORT_EMAIL=help@live.example", "GIVING_PRIVACY_URL=https://live.example/privacy", "GIVING_TERMS_URL=https://live.example/terms")
	p := decodeCLI(t, runCLI(t, env, "partners", "create", "--name", "Live Partner", "--redirect-origin", "https://live.example", "--json"))
	if !domain.WellFormedKey(domain.Production, p.APIKey) {
		t.Fatalf("production key %q", p.APIKey)
	}
	// A flag on the command line wins over the environment.
	s := decodeCLI(t, runCLI(t, env, "partners", "create", "--env", "sandbox", "--name", "Test Partner", "--redirect-origin", "https://t.example", "--json"))
	if !domain.WellFormedKey(domain.Sandbox, s.APIKey) {
		t.Fatalf("sandbox key %q", s.APIKey)
	}
	if r := runCLI(t, append(offline(dir), "GIVING_ENV=staging"), "partners", "create", "--name", "X", "--json"); r.Code != 2 || !strings.Contains(r.Stderr, "sandbox or production") {
		t.Fatalf("bad GIVING_ENV: %d %s", r.Code, r.Stderr)
	}
	if r := runCLI(t, []string{"GIVING_RATE_LIMIT=many"}, "serve"); r.Code != 2 || !strings.Contains(r.Stderr, "GIVING_RATE_LIMIT") {
		t.Fatalf("bad GIVING_RATE_LIMIT: %d %s", r.Code, r.Stderr)
	}
	if r := runCLI(t, nil, "serve", "--env", "production", "--demo", "--data", dir); r.Code != 2 || !strings.Contains(r.Stderr, "--demo") {
		t.Fatalf("--demo in production: %d %s", r.Code, r.Stderr)
	}
	if r := runCLI(t, nil, "serve", "--addr", "127.0.0.1:0", "--metrics-addr", "", "--pprof", "--data", dir); r.Code != 2 || !strings.Contains(r.Stderr, "--pprof is served on the metrics listener") {
		t.Fatalf("--pprof without a metrics listener: %d %s", r.Code, r.Stderr)
	}
	if r := runCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		"serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--data", dir); r.Code != 2 || !strings.Contains(r.Stderr, "OTLP/HTTP only") {
		t.Fatalf("traces over gRPC: %d %s", r.Code, r.Stderr)
	}

	// Production refuses to start without its vendors; these point nowhere.
	srv := startServer(t, dir, []string{"GIVING_ENV=production",
		"GIVING_PUBLIC_URL=https://giving.test", "GIVING_TWILIO_ACCOUNT_SID=AC0", "GIVING_TWILIO_AUTH_TOKEN=t", "GIVING_TWILIO_SERVICE_SID=VA0", "GIVING_TWILIO_BASE_URL=http://127.0.0.1:1",
		"GIVING_TRUV_CLIENT_ID=c", "GIVING_TRUV_SECRET=p", "GIVING_TRUV_BASE_URL=http://127.0.0.1:1",
		"GIVING_STRIPE_SECRET_KEY=sk_live_0", "GIVING_STRIPE_WEBHOOK_SECRET=whsec_0", "GIVING_STRIPE_BASE_URL=http://127.0.0.1:1",
		"GIVING_INCREASE_API_KEY=i", "GIVING_INCREASE_WEBHOOK_SECRET=b", "GIVING_INCREASE_ACCOUNT_ID=account_0", "GIVING_INCREASE_BASE_URL=http://127.0.0.1:1"})
	if !strings.Contains(srv.Stdout.String(), "production stack") {
		t.Fatalf("serve output %q", srv.Stdout)
	}
	waitStatus(t, srv.URL, p.APIKey, 200)
	waitStatus(t, srv.URL, s.APIKey, 401)
}

func TestServeDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, nil, "--demo")
	keyLine := regexp.MustCompile(`API key:\s+(sk_test_\w+)`)
	partnerLine := regexp.MustCompile(`Demo partner: (pt_\w+)`)
	// The output is collected line by line: wait for the block's last line
	// (srv is read when called, so this serves the later starts too).
	printed := func() bool { return strings.Contains(srv.Stdout.String(), `-d '{"churches":`) }
	waitFor(t, 10*time.Second, "the demo block", printed)
	key := keyLine.FindStringSubmatch(srv.Stdout.String())[1]
	pid := partnerLine.FindStringSubmatch(srv.Stdout.String())[1]
	if !strings.Contains(srv.Stdout.String(), "  export B="+srv.URL+" K="+key+"\n") || !strings.Contains(srv.Stdout.String(), "curl -s $B/v1/churches/import") {
		t.Fatalf("no export line and curl example:\n%s", srv.Stdout)
	}
	waitStatus(t, srv.URL, key, 200)
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// A second start keeps the partner, issues a fresh key and revokes the
	// one the first start printed: one demo key is valid at a time.
	srv = startServer(t, dir, nil, "--demo")
	waitFor(t, 10*time.Second, "the demo block", printed)
	if got := partnerLine.FindStringSubmatch(srv.Stdout.String())[1]; got != pid {
		t.Fatalf("demo partner %s, then %s", pid, got)
	}
	again := keyLine.FindStringSubmatch(srv.Stdout.String())[1]
	if again == key {
		t.Fatal("the same key shown twice")
	}
	waitStatus(t, srv.URL, again, 200)
	waitStatus(t, srv.URL, key, 401)
	// An operator may have revoked the printed key already: the next start
	// still comes up.
	if r := runCLI(t, []string{"GIVING_DATA=" + dir}, "keys", "revoke", "--key-prefix", again[:len("sk_test_")+8]); r.Code != 0 {
		t.Fatalf("revoke: %d %s", r.Code, r.Stderr)
	}
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	srv = startServer(t, dir, nil, "--demo")
	waitFor(t, 10*time.Second, "the demo block", printed)
	waitStatus(t, srv.URL, keyLine.FindStringSubmatch(srv.Stdout.String())[1], 200)
}

func TestReplayOfflineAndOnline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := decodeCLI(t, runCLI(t, offline(dir), "partners", "create", "--name", "Replay Partner", "--redirect-origin", "https://r.example", "--json"))
	srv := startServer(t, dir, nil, "--rate-limit", "100000", "--rate-burst", "100000")
	c := &apitest.Client{TB: t, Base: srv.URL, Key: p.APIKey}
	var ids []string
	for i := range 30 {
		var imp importResponse
		c.Do(http.MethodPost, importPath, `{"churches":[{"name":"R`+strings.Repeat("x", i)+`"}]}`, nil).JSON(t, &imp)
		ids = append(ids, imp.Results[0].Church.ID)
	}
	// Deposits, which a rebuild writes as runs (projections/runs.go).
	for i := range 3 {
		if r := c.Do(http.MethodPost, "/sandbox/simulate/deposit", fmt.Sprintf(`{"church_id":"%s","account_ref":"acct_1","amount":%d.25}`, ids[i], 10+i), nil); r.Status != 200 {
			t.Fatalf("deposit: %d %s", r.Status, r.Body)
		}
	}
	path := stack.ProjectionsPath(eventlog.Config{Env: domain.Sandbox, DataDir: dir})
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// Online: every instance rebuilds and swaps its file; reads keep working.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	var bad []int
	reads := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.DefaultClient.Do(mustRequest(srv.URL+"/v1/churches/"+ids[0], p.APIKey))
			mu.Lock()
			reads++
			if err != nil {
				bad = append(bad, -1)
			} else {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad = append(bad, resp.StatusCode)
				}
			}
			mu.Unlock()
		}
	}()
	r := runCLI(t, []string{"GIVING_DATA=" + dir}, "replay")
	close(stop)
	wg.Wait()
	if r.Code != 0 || !strings.Contains(r.Stdout, "rebuilt up to sequence") {
		t.Fatalf("online replay: %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if len(bad) > 0 || reads == 0 {
		t.Fatalf("%d of %d reads failed during the replay: %v", len(bad), reads, bad)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Fatal("the projection file was not swapped")
	}
	for _, id := range ids {
		if r := c.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != 200 {
			t.Fatalf("after replay: %s is %d", id, r.Status)
		}
	}
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// Offline: plain progress lines (not a terminal), and the same read
	// models afterwards.
	live := dumpFile(t, path)
	r = runCLI(t, offline(dir), "replay")
	if r.Code != 0 {
		t.Fatalf("offline replay: %d %s", r.Code, r.Stderr)
	}
	progress := regexp.MustCompile(`replay local: (\d+)/(\d+) events \(100%\), \d+ events/s, eta \S+`)
	m := progress.FindStringSubmatch(r.Stderr)
	if m == nil || m[1] != m[2] || strings.Contains(r.Stderr, "\r") {
		t.Fatalf("progress output %q", r.Stderr)
	}
	if !strings.Contains(r.Stdout, "up to sequence "+m[1]) {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if got := dumpFile(t, path); !reflect.DeepEqual(got, live) {
		t.Fatal("the offline replay changed the read models")
	}
	// and merged the deposits it wrote in runs before it exited.
	s, err := projections.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.RunsLeft() {
		t.Fatal("the offline replay left its deposit runs for the next start")
	}
}

func mustRequest(url, key string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}

func dumpFile(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	s, err := projections.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return dumpStore(t, s)
}

// grepDir returns the first file under dir that contains s.
func grepDir(t *testing.T, dir, s string) string {
	t.Helper()
	var found string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || found != "" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), s) {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Two stacks on one host start side by side on their defaults: metrics are
// served only where asked, and an address already taken says what to do.
func TestTwoStacksOnOneHostDoNotCollide(t *testing.T) {
	t.Parallel()
	var stacks []*server
	production := []string{"GIVING_PUBLIC_URL=https://giving.test", "GIVING_TWILIO_ACCOUNT_SID=AC0", "GIVING_TWILIO_AUTH_TOKEN=t", "GIVING_TWILIO_SERVICE_SID=VA0", "GIVING_TWILIO_BASE_URL=http://127.0.0.1:1",
		"GIVING_TRUV_CLIENT_ID=c", "GIVING_TRUV_SECRET=p", "GIVING_TRUV_BASE_URL=http://127.0.0.1:1",
		"GIVING_STRIPE_SECRET_KEY=sk_live_0", "GIVING_STRIPE_WEBHOOK_SECRET=whsec_0", "GIVING_STRIPE_BASE_URL=http://127.0.0.1:1",
		"GIVING_INCREASE_API_KEY=i", "GIVING_INCREASE_WEBHOOK_SECRET=b", "GIVING_INCREASE_ACCOUNT_ID=account_0", "GIVING_INCREASE_BASE_URL=http://127.0.0.1:1"}
	for env, vars := range map[string][]string{"sandbox": nil, "production": production} {
		s := launchCommand(t, "", vars, "serve", "--env", env, "--data", t.TempDir(),
			"--addr", "127.0.0.1:0", "--nats-listen", "")
		s.waitPrinted(t, "its address", func(line string) bool { return strings.Contains(line, " stack listening on ") })
		stacks = append(stacks, s)
	}
	for _, s := range stacks {
		if strings.Contains(s.Stdout.String(), "/metrics") {
			t.Fatalf("metrics served though no --metrics-addr was given:\n%s", s.Stdout)
		}
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	r := runCLI(t, nil, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--nats-listen", "", "--metrics-addr", taken.Addr().String())
	if r.Code == 0 || !strings.Contains(r.Stderr, "--metrics-addr") || !strings.Contains(r.Stderr, "give each instance on a host its own --metrics-addr") {
		t.Fatalf("a taken metrics address: %d %s", r.Code, r.Stderr)
	}
}
