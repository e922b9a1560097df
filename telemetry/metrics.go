package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
)

// Metrics is one instance's registry and every metric it records.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	appendDuration prometheus.Histogram
	appends        *prometheus.CounterVec
	batchSize      prometheus.Histogram

	deliveries       *prometheus.CounterVec
	deliveryDuration prometheus.Histogram
	dispatchLag      *prometheus.HistogramVec

	feedPage       prometheus.Histogram
	rateLimited    prometheus.Counter
	replays        prometheus.Counter
	vendorWebhooks *prometheus.CounterVec
	stalls         *prometheus.CounterVec
}

// Ledger append results, the values of giving_ledger_appends_total's
// result label.
const (
	AppendOK          = "ok"
	AppendDuplicate   = "duplicate"
	AppendConflict    = "conflict"
	AppendRejected    = "rejected"
	AppendUnavailable = "unavailable"
)

// Vendor webhook results, the values of giving_vendor_webhooks_total's
// result label.
const (
	VendorAccepted         = "accepted"
	VendorDuplicate        = "duplicate"
	VendorInvalidSignature = "invalid_signature"
	VendorInvalid          = "invalid"
	VendorRefused          = "refused"
	VendorFailed           = "failed"
	VendorIgnored          = "ignored"
)

// Stages of a webhook's way from the ledger to its first attempt, the
// values of giving_webhook_dispatch_lag_seconds's stage label.
const (
	// LagRead: the fan-out received the event from the ledger.
	LagRead = "read"
	// LagApplied: this instance's projections hold the event, so the
	// fan-out may hand it on (a partner reading here finds it).
	LagApplied = "applied"
	// LagAttempted: the event's first attempt to one endpoint began.
	LagAttempted = "attempted"
)

// Long-lived ledger consumers, the values of giving_ledger_consumer_stalls_total's
// consumer label.
const (
	// ConsumerFollower: an instance's own reader of the ledger, feeding its
	// projections.
	ConsumerFollower = "follower"
	// ConsumerSharedReader: the reader the instances share to fan events out
	// to webhook endpoints.
	ConsumerSharedReader = "shared_reader"
	// ConsumerDeliveryQueue: one webhook endpoint's reader of the delivery
	// queue (its retries and the deliveries its pusher had no room for).
	ConsumerDeliveryQueue = "delivery_queue"
)

// Delivery outcomes and vendor kinds, listed so that every series exists
// from the start: a rate or a ratio over a series that appears only with
// its first failure is blind until then.
var (
	deliveryOutcomes = []string{"succeeded", "failed", "timeout", "network_error"}
	vendorKinds      = []string{"payroll", "bank", "kyc"}
	vendorResults    = []string{VendorAccepted, VendorDuplicate, VendorIgnored, VendorInvalidSignature, VendorInvalid, VendorRefused, VendorFailed}
	appendResults    = []string{AppendOK, AppendDuplicate, AppendConflict, AppendRejected, AppendUnavailable}
	lagStages        = []string{LagRead, LagApplied, LagAttempted}
	consumers        = []string{ConsumerFollower, ConsumerSharedReader, ConsumerDeliveryQueue}
)

// NewMetrics builds a registry with every metric of the service, the Go
// runtime's and the process's.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "giving_http_requests_total",
		Help: "HTTP requests answered by the public listener, by route template, method and status code.",
	}, []string{"route", "method", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "giving_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route template and method (feed long polls include their wait).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method"})
	m.appendDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "giving_ledger_append_duration_seconds",
		Help:    "Time for the ledger to store one append (a synced write) and acknowledge it.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.appends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "giving_ledger_appends_total",
		Help: "Ledger appends by result: ok, duplicate (dedup id seen), conflict (aggregate moved on), rejected (too large), unavailable.",
	}, []string{"result"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "giving_ledger_batch_size",
		Help:    "Events stored by one synced ledger write.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "giving_webhook_deliveries_total",
		Help: "Webhook delivery attempts by outcome: succeeded, failed (non-2xx answer), timeout, network_error.",
	}, []string{"outcome"})
	m.deliveryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "giving_webhook_delivery_duration_seconds",
		Help:    "Time of one webhook delivery attempt, from connecting to the receiver's answer.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	m.dispatchLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "giving_webhook_dispatch_lag_seconds",
		Help: "Time from an event's storage in the ledger (the ledger's clock) to a stage of its webhook dispatch, for events with an endpoint to deliver to: " +
			"read (the fan-out received it), applied (this instance's projections hold it), attempted (its first attempt to an endpoint began; one per endpoint).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"stage"})
	m.feedPage = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "giving_feed_page_duration_seconds",
		Help:    "Time to read one page of the event feed (a long poll's waiting excluded).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.rateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "giving_ratelimit_rejections_total",
		Help: "Requests answered 429 because their API key spent its rate limit.",
	})
	m.replays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "giving_idempotency_replays_total",
		Help: "Requests answered from an earlier request's stored response (Idempotent-Replayed: true).",
	})
	m.vendorWebhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "giving_vendor_webhooks_total",
		Help: "Inbound vendor webhooks by vendor and result: accepted, duplicate, invalid_signature, invalid, refused (a 4xx from the use case), failed (ours).",
	}, []string{"vendor", "result"})

	m.stalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "giving_ledger_consumer_stalls_total",
		Help: "Times a long-lived ledger consumer received nothing while the ledger held events for it, and was torn down to be made again (watchdog), by consumer: follower, shared_reader, delivery_queue.",
	}, []string{"consumer"})
	for _, c := range consumers {
		m.stalls.WithLabelValues(c)
	}
	for _, o := range deliveryOutcomes {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range appendResults {
		m.appends.WithLabelValues(r)
	}
	for _, st := range lagStages {
		m.dispatchLag.WithLabelValues(st)
	}
	for _, v := range vendorKinds {
		for _, r := range vendorResults {
			m.vendorWebhooks.WithLabelValues(v, r)
		}
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.appendDuration, m.appends, m.batchSize,
		m.deliveries, m.deliveryDuration, m.dispatchLag, m.feedPage, m.rateLimited, m.replays, m.vendorWebhooks, m.stalls,
	)
	return m
}

// Registry is where the metrics are registered, for the handler and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// HTTPRequest records one answered request. route must be a route
// template (or a fixed placeholder for requests no route matched).
func (m *Metrics) HTTPRequest(ctx context.Context, route, method string, code int, d time.Duration) {
	if m == nil {
		return
	}
	method = HTTPMethod(method)
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	observe(ctx, m.httpDuration.WithLabelValues(route, method), d)
}

// ConsumerStalled counts a stalled consumer torn down by its watchdog.
func (m *Metrics) ConsumerStalled(consumer string) {
	if m == nil {
		return
	}
	m.stalls.WithLabelValues(consumer).Inc()
}

// HTTPMethod keeps a method label or span name bounded: a client may send
// any token as a method, and every one but the standard ones is "OTHER".
func HTTPMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// AppendConflicts is how many appends the ledger refused so far because
// their aggregate had moved on (AppendConflict): what the bench and the
// tests count writers' races by.
func (m *Metrics) AppendConflicts() float64 {
	var out dto.Metric
	if err := m.appends.WithLabelValues(AppendConflict).Write(&out); err != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}

// LedgerAppend records one append's result and how long the ledger took.
func (m *Metrics) LedgerAppend(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.appends.WithLabelValues(result).Inc()
	if result == AppendOK || result == AppendDuplicate {
		m.appendDuration.Observe(d.Seconds())
	}
}

// LedgerBatch records how many events one synced write stored.
func (m *Metrics) LedgerBatch(events int) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(events))
}

// WebhookDelivery records one delivery attempt.
func (m *Metrics) WebhookDelivery(ctx context.Context, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(outcome).Inc()
	observe(ctx, m.deliveryDuration, d)
}

// DispatchLag records that the webhook dispatch of an event the ledger
// stored at stored reached stage (LagRead, LagApplied, LagAttempted) at now.
// A negative lag (the ledger's clock ahead of this instance's) counts as
// none.
func (m *Metrics) DispatchLag(stage string, stored, now time.Time) {
	if m == nil || stored.IsZero() {
		return
	}
	m.dispatchLag.WithLabelValues(stage).Observe(max(now.Sub(stored), 0).Seconds())
}

// FeedPage records the time one read of a feed page took.
func (m *Metrics) FeedPage(d time.Duration) {
	if m == nil {
		return
	}
	m.feedPage.Observe(d.Seconds())
}

// RateLimited counts a request refused by the rate limiter.
func (m *Metrics) RateLimited() {
	if m == nil {
		return
	}
	m.rateLimited.Inc()
}

// IdempotentReplay counts a request answered from a stored response.
func (m *Metrics) IdempotentReplay() {
	if m == nil {
		return
	}
	m.replays.Inc()
}

// VendorWebhook counts an inbound vendor webhook; vendor is one of the
// edge's fixed kinds and result one of the Vendor* constants.
func (m *Metrics) VendorWebhook(vendor, result string) {
	if m == nil {
		return
	}
	m.vendorWebhooks.WithLabelValues(vendor, result).Inc()
}

// observe records a duration, with the trace it belongs to as an exemplar
// when this process exports that trace, so a slow bucket leads to a trace.
// (A caller's sampled traceparent alone, with tracing off, names a trace no
// one can find.)
func observe(ctx context.Context, o prometheus.Observer, d time.Duration) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() && exporting.Load() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(d.Seconds())
}
