package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRulesAndDashboard checks deploy/ with Prometheus's own tool: the
// alert rules load, their unit tests (alerts_test.yml) pass, and every
// dashboard query parses and uses only the fixed metric names (and the Go
// and process collectors'). TestMetricsAfterRealTraffic checks that the
// service serves every name both use.
func TestAlertRulesAndDashboard(t *testing.T) {
	t.Parallel()
	promtoolPath(t)
	promtool(t, "", "check", "rules", "../deploy/prometheus/alerts.yml")
	cmd := exec.Command(promtoolPath(t), "test", "rules", "alerts_test.yml")
	cmd.Dir = "../deploy/prometheus"
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// The alerts the issue asks for, by what they watch.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	raw, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	watched := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			watched[r.Alert] = r.Expr
		}
	}
	for alert, metric := range map[string]string{
		"GivingProjectorLagging":        "giving_projector_lag_events",
		"GivingWebhookFailureRatioHigh": "giving_webhook_deliveries_total",
		"GivingWebhookBacklogOld":       "giving_webhook_backlog_age_seconds",
		"GivingLedgerUnavailable":       "giving_ledger_up",
		"GivingHTTP5xxRatioHigh":        "giving_http_requests_total",
	} {
		if !strings.Contains(watched[alert], metric) {
			t.Errorf("alert %s missing or not on %s: %q", alert, metric, watched[alert])
		}
	}

	// The dashboard: only the fixed names, and every query valid PromQL
	// (checked by loading them as recording rules).
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err = os.ReadFile("../deploy/grafana/giving.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var recording strings.Builder
	recording.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				base := strings.TrimSuffix(name, "_bucket")
				if !slices.Contains(families, base) && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
					t.Errorf("panel %q uses %s, not one of the fixed metric names", p.Title, name)
				}
			}
			expr, _ := json.Marshal(strings.ReplaceAll(target.Expr, "$instance", ".*"))
			fmt.Fprintf(&recording, "      - record: dashboard:query%d\n        expr: %s\n", queries, expr)
		}
	}
	if queries < 20 {
		t.Fatalf("the dashboard has only %d queries", queries)
	}
	file := filepath.Join(t.TempDir(), "dashboard.yml")
	if err := os.WriteFile(file, []byte(recording.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "", "check", "rules", file)
}
