package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// families are the metric families the issue fixes by name (dashboards
// and alerts rely on them); each must move under real traffic.
var families = []string{
	"giving_http_requests_total", "giving_http_request_duration_seconds",
	"giving_ledger_append_duration_seconds", "giving_ledger_appends_total", "giving_ledger_batch_size",
	"giving_projector_applied_sequence", "giving_ledger_last_sequence", "giving_projector_lag_events",
	"giving_webhook_deliveries_total", "giving_webhook_delivery_duration_seconds", "giving_webhook_backlog",
	"giving_webhook_endpoints", "giving_webhook_dispatch_lag_seconds",
	"giving_feed_page_duration_seconds", "giving_ratelimit_rejections_total",
	"giving_idempotency_replays_total", "giving_vendor_webhooks_total",
}

// idLike matches anything that looks like one of the service's ids or keys.
var idLike = regexp.MustCompile(`(pt|ch|ds|dn|en|we|evt|req|dep|att)_[0-9A-Za-z]{20,}|sk_(test|live)_|whsec_`)

// TestMetricsAfterRealTraffic runs the real binary with its metrics
// listener, sends it real traffic (an import and its replay, a donor through
// the hosted flow, deliveries to a receiver that accepts and one that fails,
// vendor webhooks good and forged, feed reads, a key hammering its rate
// limit), then scrapes it: every family moved, no label holds an id, a key,
// a token or a phone, promtool finds nothing, and every metric the alert
// rules and the dashboard use is served. It also reads the log lines for
// what went wrong.
func TestMetricsAfterRealTraffic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir, nil, "--metrics-addr", "127.0.0.1:0", "--pprof", "--webhook-retry-schedule", "200ms,1h")
	metrics := srv.metricsURL(t)
	c, _ := srv.partner(t, "https://partner.example")
	hammer, _ := srv.partner(t, "https://partner.example")

	church := importChurch(t, c, "Grace Chapel")
	for range 2 {
		r := c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"St Mark"}]}`, apitest.Header{"Idempotency-Key": "metrics-import-1"})
		if r.Status != http.StatusOK {
			t.Fatalf("import: %d %s", r.Status, r.Body)
		}
	}
	ok := okReceiver(t)
	failing := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return http.StatusInternalServerError })
	createEndpoint(t, c, ok.URL)
	bad := createEndpoint(t, c, failing.URL)

	const phone = "+12025550100"
	s := openSession(t, c, church, phone, "pct", "3", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	verifiedDonor(t, d)
	d.connectPayroll("user_good").expect(t, http.StatusOK, "You're all set")
	enrollment := waitSessionStatus(t, c, s.ID, "completed").EnrollmentID

	if r := c.Do(http.MethodPost, "/sandbox/simulate/payroll-connected", map[string]string{"enrollment_id": *enrollment, "church_id": church}, nil); r.Status != http.StatusOK {
		t.Fatalf("simulate payroll: %d %s", r.Status, r.Body)
	}
	c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct_1","amount":10.10}`, nil)
	forged, _ := http.Post(srv.URL+"/edge/bank", "application/json", strings.NewReader(`{"id":"x"}`))
	forged.Body.Close()
	c.Do(http.MethodGet, "/v1/events?limit=10", nil, nil)
	c.Do(http.MethodGet, "/v1/churches/ch_2wYjb1xV1ExampleNotThere0000", nil, nil)
	if resp, err := http.Get(srv.URL + "/v1/sk_test_notakey/+12025550100"); err == nil {
		resp.Body.Close()
	}
	if limited := hammerUntilLimited(t, hammer); !limited {
		t.Fatal("a key sending 200 requests at once was never rate limited")
	}

	waitFor(t, 30*time.Second, "the failing receiver to be tried twice and the good one to get every event", func() bool {
		return failing.count() >= 2 && len(ok.received()) >= 3
	})
	var m scrape
	var firstAttempts int
	waitFor(t, 30*time.Second, "the scrape to show the failures, a retry made and the waiting retry", func() bool {
		firstAttempts = firstAttemptsTo(ok, failing)
		retried := failing.count() > len(distinctEvents(failing))
		m = scrapeMetrics(t, metrics)
		failed, _ := m.value("giving_webhook_deliveries_total", map[string]string{"outcome": "failed"})
		backlog, _ := m.value("giving_webhook_backlog", nil)
		return failed >= 2 && backlog >= 1 && retried
	})
	// Each event's first attempt to each endpoint is timed from the ledger
	// once; retries (the failing receiver's second try) and the events
	// nobody subscribes to are not.
	attempted, _ := m.value("giving_webhook_dispatch_lag_seconds", map[string]string{"stage": "attempted"})
	if after := firstAttemptsTo(ok, failing); attempted < float64(firstAttempts) || attempted > float64(after) {
		t.Errorf("dispatch lag timed %v first attempts; the receivers saw %d before the scrape and %d after (the failing one %d attempts in all)",
			attempted, firstAttempts, after, failing.count())
	}
	lagRead, _ := m.value("giving_webhook_dispatch_lag_seconds", map[string]string{"stage": "read"})
	lagApplied, _ := m.value("giving_webhook_dispatch_lag_seconds", map[string]string{"stage": "applied"})
	// (One fan-out observes both stages of an event in turn: a scrape
	// between the two sees one more read.)
	if got := len(distinctEvents(ok)); lagRead < float64(got) || lagApplied != lagRead && lagApplied != lagRead-1 {
		t.Errorf("dispatch lag: %v events read and %v applied, want as many, and at least the %d the good receiver got", lagRead, lagApplied, got)
	}

	moved := map[string]map[string]string{
		"giving_http_requests_total":               {"route": "/flow/{token}/payroll", "method": "POST", "code": "303"},
		"giving_http_request_duration_seconds":     {"route": "/v1/churches/import", "method": "POST"},
		"giving_ledger_append_duration_seconds":    nil,
		"giving_ledger_appends_total":              {"result": "ok"},
		"giving_ledger_batch_size":                 nil,
		"giving_projector_applied_sequence":        nil,
		"giving_ledger_last_sequence":              nil,
		"giving_webhook_deliveries_total":          {"outcome": "succeeded"},
		"giving_webhook_delivery_duration_seconds": nil,
		"giving_webhook_backlog":                   nil,
		"giving_webhook_endpoints":                 {"status": "enabled"},
		"giving_webhook_dispatch_lag_seconds":      {"stage": "attempted"},
		"giving_feed_page_duration_seconds":        nil,
		"giving_ratelimit_rejections_total":        nil,
		"giving_idempotency_replays_total":         nil,
		"giving_vendor_webhooks_total":             {"vendor": "payroll", "result": "accepted"},
	}
	for _, name := range families {
		if name == "giving_projector_lag_events" {
			continue // checked below: after catching up it is 0, and must equal last - applied
		}
		want, listed := moved[name]
		if !listed {
			t.Fatalf("no expectation for %s", name)
		}
		if v, found := m.value(name, want); !found || v <= 0 {
			t.Errorf("%s%v did not move: %v (present %v)", name, want, v, found)
		}
	}
	for _, want := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"giving_vendor_webhooks_total", map[string]string{"vendor": "bank", "result": "accepted"}, 1},
		{"giving_vendor_webhooks_total", map[string]string{"vendor": "bank", "result": "invalid_signature"}, 1},
		{"giving_webhook_deliveries_total", map[string]string{"outcome": "failed"}, 2},
		{"giving_webhook_endpoints", map[string]string{"status": "enabled"}, 2},
		{"giving_http_requests_total", map[string]string{"route": "(unmatched)", "method": "GET", "code": "404"}, 1},
		{"giving_http_requests_total", map[string]string{"route": "/v1/churches/{id}", "method": "GET", "code": "404"}, 1},
		{"giving_http_requests_total", map[string]string{"route": "/v1/churches", "method": "GET", "code": "429"}, 1},
	} {
		if v, _ := m.value(want.name, want.labels); v < want.min {
			t.Errorf("%s%v = %v, want at least %v", want.name, want.labels, v, want.min)
		}
	}
	last, _ := m.value("giving_ledger_last_sequence", nil)
	applied, _ := m.value("giving_projector_applied_sequence", nil)
	lag, found := m.value("giving_projector_lag_events", nil)
	if !found || lag != last-applied || applied > last {
		t.Errorf("lag %v (present %v) with last %v and applied %v", lag, found, last, applied)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if _, found := m.value(name, nil); !found {
			t.Errorf("%s is missing: the Go and process collectors must be registered", name)
		}
	}

	// Every label value is bounded: no id, key, token or phone.
	for name, fam := range m.Families {
		for _, metric := range fam.GetMetric() {
			for _, l := range metric.GetLabel() {
				if v := l.GetValue(); idLike.MatchString(v) || strings.Contains(v, "/flow/") && v != "/flow/{token}" && !strings.HasPrefix(v, "/flow/{token}/") {
					t.Errorf("%s has an unbounded label %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
	sweep(t, "/metrics", []byte(m.Text), []string{phone})
	if strings.Contains(m.Text, strings.TrimPrefix(s.URL, srv.URL+"/flow/")) {
		t.Error("/metrics holds a flow token")
	}
	if out := promtool(t, m.Text, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics: %s", out)
	}

	// Everything the alert rules and the dashboard use is served.
	for _, name := range deployedMetricNames(t) {
		if _, found := m.Families[name]; !found {
			t.Errorf("deploy/ uses %s, which the service does not export", name)
		}
	}

	// The listener is the operators' alone: the API does not serve it, and
	// pprof is there with --pprof (without the command line, which may hold
	// secrets).
	for u, want := range map[string]int{
		srv.URL + "/metrics": http.StatusNotFound,
		strings.TrimSuffix(metrics, "/metrics") + "/debug/pprof/":        http.StatusOK,
		strings.TrimSuffix(metrics, "/metrics") + "/debug/pprof/cmdline": http.StatusNotFound,
	} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", u, resp.StatusCode, want)
		}
	}

	// What went wrong is in the log, one structured line each.
	logs := logLines(t, srv.Stderr.String())
	attempt := findLine(logs, "webhook attempt failed; retry scheduled")
	if attempt == nil || attempt["endpoint_id"] != bad.ID || attempt["event_id"] == nil || attempt["attempt"] == nil ||
		attempt["reason"] != "the receiver answered 500 Internal Server Error" || attempt["next_attempt_at"] == nil || attempt["level"] != "warn" {
		t.Errorf("failed attempt line: %v", attempt)
	}
	if l := findLine(logs, "vendor webhook rejected"); l == nil || l["vendor"] != "bank" || l["result"] != "invalid_signature" ||
		!strings.Contains(fmt.Sprint(l["reason"]), "missing") {
		t.Errorf("vendor rejection line: %v", l)
	}
	if l := findLine(logs, "rate limited (sampled: the first 10 a minute, then 1 in 100)"); l == nil || l["key_id"] == nil || l["route"] != "/v1/churches" {
		t.Errorf("rate limit line: %v", l)
	}
	sweep(t, "the logs", []byte(srv.Stderr.String()), []string{phone})
}

// distinctEvents is the events a receiver got, each once however often
// it was sent.
func distinctEvents(rc *receiver) map[string]bool {
	seen := map[string]bool{}
	for _, d := range rc.deliveries() {
		seen[d.EventID] = true
	}
	return seen
}

// firstAttemptsTo counts the first attempts the receivers got: one per
// event each, retries aside.
func firstAttemptsTo(receivers ...*receiver) int {
	n := 0
	for _, rc := range receivers {
		n += len(distinctEvents(rc))
	}
	return n
}

// hammerUntilLimited sends 200 requests at once with one key and reports
// whether any was refused with 429.
func hammerUntilLimited(t *testing.T, c *apitest.Client) bool {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	limited := false
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, c.Base+"/v1/churches", nil)
			req.Header.Set("Authorization", "Bearer "+c.Key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			mu.Lock()
			limited = limited || resp.StatusCode == http.StatusTooManyRequests
			mu.Unlock()
		}()
	}
	wg.Wait()
	return limited
}

// logLines decodes JSON log output, one object a line.
func logLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// findLine returns the first log line with message msg.
func findLine(lines []map[string]any, msg string) map[string]any {
	for _, l := range lines {
		if l["message"] == msg {
			return l
		}
	}
	return nil
}

// deployedMetricNames lists every metric the alert rules and the dashboard
// in deploy/ query, histograms by their family name.
func deployedMetricNames(t *testing.T) []string {
	t.Helper()
	var text strings.Builder
	for _, pattern := range []string{"../deploy/prometheus/*.yml", "../deploy/grafana/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.yml") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text.Write(b)
		}
	}
	if text.Len() == 0 {
		t.Fatal("no alert rules or dashboard in deploy/")
	}
	seen := map[string]bool{}
	var names []string
	for _, n := range metricName.FindAllString(text.String(), -1) {
		// A histogram's series are named after its family.
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, cut := strings.CutSuffix(n, suffix); cut && (strings.HasSuffix(base, "_seconds") || strings.HasSuffix(base, "_size")) {
				n = base
			}
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\b(giving|go|process)_[a-z_]+[a-z]\b`)
