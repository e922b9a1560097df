package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/partnergiving/giving/telemetry"
)

// ledgerState stands in for an instance's parts at scrape time; the end to
// end tests scrape real ones.
type ledgerState struct {
	last    uint64
	down    bool
	applied uint64
	backlog telemetry.Backlog
}

func (s ledgerState) LedgerLastSeq(context.Context) (uint64, error) {
	if s.down {
		return 0, errors.New("nats: no responders")
	}
	return s.last, nil
}
func (s ledgerState) ProjectorApplied() uint64 { return s.applied }
func (s ledgerState) WebhookBacklog(context.Context) (telemetry.Backlog, error) {
	if s.down {
		return telemetry.Backlog{}, errors.New("nats: no responders")
	}
	return s.backlog, nil
}
func (s ledgerState) WebhookEndpoints() (map[string]int, error) {
	return map[string]int{"enabled": 3}, nil
}

func scrape(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestScrapeTimeGauges(t *testing.T) {
	up := telemetry.NewMetrics()
	up.Watch(ledgerState{last: 120, applied: 100, backlog: telemetry.Backlog{Waiting: 7, OldestReady: time.Now().Add(-90 * time.Second)}})
	text := scrape(t, up)
	for _, want := range []string{
		"giving_ledger_up 1\n", "giving_ledger_last_sequence 120\n", "giving_projector_applied_sequence 100\n",
		"giving_projector_lag_events 20\n", "giving_webhook_backlog 7\n", `giving_webhook_endpoints{status="enabled"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(?m)^giving_webhook_backlog_age_seconds (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no backlog age:\n%s", text)
	}
	if age, err := strconv.ParseFloat(m[1], 64); err != nil || age < 90 || age > 100 {
		t.Errorf("backlog age %s, want about 90s", m[1])
	}

	// With the ledger gone the scrape still answers: the ledger is down, its
	// position and the lag are absent rather than made up, and the rest is
	// served.
	down := telemetry.NewMetrics()
	down.Watch(ledgerState{down: true, applied: 100})
	text = scrape(t, down)
	if !strings.Contains(text, "giving_ledger_up 0\n") || !strings.Contains(text, "giving_projector_applied_sequence 100\n") {
		t.Errorf("ledger down:\n%s", text)
	}
	for _, absent := range []string{"giving_ledger_last_sequence ", "giving_projector_lag_events ", "giving_webhook_backlog "} {
		if strings.Contains(text, absent) {
			t.Errorf("ledger down, yet the scrape has %q", absent)
		}
	}
}

func TestLabelsStayBounded(t *testing.T) {
	m := telemetry.NewMetrics()
	m.HTTPRequest(context.Background(), "(unmatched)", "BREW", 405, time.Millisecond)
	m.HTTPRequest(context.Background(), "/v1/churches", "GET", 200, time.Millisecond)
	text := scrape(t, m)
	if strings.Contains(text, "BREW") || !strings.Contains(text, `giving_http_requests_total{code="405",method="OTHER",route="(unmatched)"} 1`) {
		t.Errorf("an unknown method must be OTHER:\n%s", text)
	}
	// Every outcome and result series exists before its first event, so
	// ratios and rates over them work from the start.
	for _, want := range []string{
		`giving_webhook_deliveries_total{outcome="failed"} 0`, `giving_ledger_appends_total{result="unavailable"} 0`,
		`giving_vendor_webhooks_total{result="invalid_signature",vendor="kyc"} 0`,
		`giving_webhook_dispatch_lag_seconds_count{stage="read"} 0`, `giving_webhook_dispatch_lag_seconds_count{stage="attempted"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	// A nil registry (the CLI's) records nothing and does not fail.
	var none *telemetry.Metrics
	none.HTTPRequest(context.Background(), "/", "GET", 200, 0)
	none.LedgerAppend(telemetry.AppendOK, 0)
	none.VendorWebhook("bank", telemetry.VendorAccepted)
	none.DispatchLag(telemetry.LagAttempted, time.Now(), time.Now())
}

// The dispatch lag is measured from the ledger's clock: one behind this
// instance's counts as no lag, not as a negative one, and a record with no
// storage time (none is read that way) is not counted.
func TestDispatchLag(t *testing.T) {
	m := telemetry.NewMetrics()
	stored := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	m.DispatchLag(telemetry.LagRead, stored, stored.Add(30*time.Millisecond))
	m.DispatchLag(telemetry.LagRead, stored, stored.Add(-time.Second))
	m.DispatchLag(telemetry.LagApplied, time.Time{}, stored)
	m.DispatchLag(telemetry.LagAttempted, stored, stored.Add(2*time.Second))
	text := scrape(t, m)
	for _, want := range []string{
		`giving_webhook_dispatch_lag_seconds_count{stage="read"} 2`,
		`giving_webhook_dispatch_lag_seconds_sum{stage="read"} 0.03`,
		`giving_webhook_dispatch_lag_seconds_bucket{stage="read",le="0.001"} 1`,
		`giving_webhook_dispatch_lag_seconds_bucket{stage="read",le="0.05"} 2`,
		`giving_webhook_dispatch_lag_seconds_count{stage="applied"} 0`,
		`giving_webhook_dispatch_lag_seconds_count{stage="attempted"} 1`,
		`giving_webhook_dispatch_lag_seconds_bucket{stage="attempted",le="1"} 0`,
		`giving_webhook_dispatch_lag_seconds_bucket{stage="attempted",le="2.5"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestTraceParentLinksBack(t *testing.T) {
	if tp := telemetry.TraceParent(context.Background()); tp != "" {
		t.Fatalf("no span, yet traceparent %q", tp)
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())))
	ctx, span := telemetry.Start(context.Background(), "ledger.append")
	defer span.End()
	tp := telemetry.TraceParent(ctx)
	link, ok := telemetry.LinkTo(tp)
	if !ok || link.SpanContext.TraceID() != span.SpanContext().TraceID() || link.SpanContext.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("traceparent %q links to %v, want the span %v", tp, link.SpanContext, span.SpanContext())
	}
	for _, bad := range []string{"", "00-zz-yy-01", "not a traceparent"} {
		if _, ok := telemetry.LinkTo(bad); ok {
			t.Errorf("LinkTo(%q) made a link", bad)
		}
	}
	// A request's header continues the caller's trace.
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, child := telemetry.Start(telemetry.Extract(context.Background(), h), "POST /v1/churches/import")
	defer child.End()
	if got := telemetry.TraceID(ctx); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %q, want the caller's", got)
	}
}

func TestTracingIsOffUnlessAsked(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if telemetry.TracingEnabled() {
		t.Fatal("tracing on with no endpoint")
	}
	shutdown, err := telemetry.Setup(context.Background(), telemetry.Service{})
	if err != nil || shutdown(context.Background()) != nil {
		t.Fatalf("setup without an endpoint: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := telemetry.Setup(context.Background(), telemetry.Service{}); err == nil || !strings.Contains(err.Error(), "OTLP/HTTP only") {
		t.Errorf("grpc protocol: %v, want a refusal naming OTLP/HTTP", err)
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if telemetry.TracingEnabled() {
		t.Error("OTEL_SDK_DISABLED=true must turn tracing off")
	}
}

// AppendConflicts counts the appends refused for a moved-on aggregate, and
// nothing else.
func TestAppendConflicts(t *testing.T) {
	m := telemetry.NewMetrics()
	m.LedgerAppend(telemetry.AppendOK, time.Millisecond)
	m.LedgerAppend(telemetry.AppendConflict, time.Millisecond)
	m.LedgerAppend(telemetry.AppendDuplicate, time.Millisecond)
	m.LedgerAppend(telemetry.AppendConflict, time.Millisecond)
	if got := m.AppendConflicts(); got != 2 {
		t.Fatalf("AppendConflicts = %v, want 2", got)
	}
}
