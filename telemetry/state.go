package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State answers the gauges read when Prometheus scrapes: positions in the
// ledger and the projections, and what waits for webhook delivery. The
// instance's wiring implements it over its ledger, store and dispatcher.
type State interface {
	// LedgerLastSeq is the ledger's newest sequence; an error means the
	// ledger does not answer.
	LedgerLastSeq(ctx context.Context) (uint64, error)
	// ProjectorApplied is the last sequence this instance's projections hold.
	ProjectorApplied() uint64
	// WebhookBacklog is what waits in the delivery queue, shared by every
	// instance.
	WebhookBacklog(ctx context.Context) (Backlog, error)
	// WebhookEndpoints counts the registered endpoints by status.
	WebhookEndpoints() (map[string]int, error)
}

// Backlog is what waits for webhook delivery.
type Backlog struct {
	// Waiting counts delivery jobs not yet settled: ready, in flight, or
	// scheduled for a retry.
	Waiting uint64
	// OldestReady is when the oldest job ready for an attempt was queued;
	// zero when none is.
	OldestReady time.Time
}

// scrapeTimeout bounds the ledger reads one scrape makes.
const scrapeTimeout = 3 * time.Second

var (
	descApplied = prometheus.NewDesc("giving_projector_applied_sequence",
		"Last ledger sequence this instance's projections have applied.", nil, nil)
	descLastSeq = prometheus.NewDesc("giving_ledger_last_sequence",
		"Newest sequence in the ledger (absent while the ledger does not answer).", nil, nil)
	descLag = prometheus.NewDesc("giving_projector_lag_events",
		"Ledger events this instance's projections have not applied yet.", nil, nil)
	descLedgerUp = prometheus.NewDesc("giving_ledger_up",
		"1 when the ledger answered this scrape, 0 when it did not.", nil, nil)
	descBacklog = prometheus.NewDesc("giving_webhook_backlog",
		"Webhook deliveries waiting (ready, in flight or scheduled for a retry), across every instance sharing the ledger.", nil, nil)
	descBacklogAge = prometheus.NewDesc("giving_webhook_backlog_age_seconds",
		"How long the oldest delivery ready for an attempt has waited (0 when none waits).", nil, nil)
	descEndpoints = prometheus.NewDesc("giving_webhook_endpoints",
		"Registered webhook endpoints by status.", []string{"status"}, nil)
)

// stateCollector reads State at every scrape.
type stateCollector struct {
	state State
	now   func() time.Time
}

// Watch exports the gauges State answers.
func (m *Metrics) Watch(s State) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&stateCollector{state: s, now: time.Now})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApplied, descLastSeq, descLag, descLedgerUp, descBacklog, descBacklogAge, descEndpoints} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	applied := c.state.ProjectorApplied()
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(applied))
	last, err := c.state.LedgerLastSeq(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descLedgerUp, prometheus.GaugeValue, 0)
	} else {
		ch <- prometheus.MustNewConstMetric(descLedgerUp, prometheus.GaugeValue, 1)
		ch <- prometheus.MustNewConstMetric(descLastSeq, prometheus.GaugeValue, float64(last))
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(last-min(applied, last)))
	}
	if b, err := c.state.WebhookBacklog(ctx); err == nil {
		age := 0.0
		if !b.OldestReady.IsZero() {
			age = max(c.now().Sub(b.OldestReady).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(b.Waiting))
		ch <- prometheus.MustNewConstMetric(descBacklogAge, prometheus.GaugeValue, age)
	}
	if counts, err := c.state.WebhookEndpoints(); err == nil {
		for status, n := range counts {
			ch <- prometheus.MustNewConstMetric(descEndpoints, prometheus.GaugeValue, float64(n), status)
		}
	}
}
