package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/partnergiving/giving/httpapi/apitest"
)

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
