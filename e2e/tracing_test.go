package e2e

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// TestTraceFromDonorSessionToDelivery runs the real binary exporting traces
// by OTLP to a receiver in this test, sends W3C traceparent headers, takes a
// donor through the hosted flow, and follows the enrollment.created event
// from the request that created it (the payroll vendor's webhook, a trace
// of its own) to its webhook delivery: the partner's and the donor's
// requests continue their callers' traces, the use case and the ledger
// append are a request's descendants, and the projector's apply and the
// delivery attempt (each a trace of its own) link to that append. Nothing of the
// trace reaches the partner, and no span holds the phone or the flow token.
func TestTraceFromDonorSessionToDelivery(t *testing.T) {
	t.Parallel()
	otlp := newOTLPReceiver(t)
	var leaked atomic.Bool
	hooks := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) int {
		if r.Header.Get("traceparent") != "" || r.Header.Get("tracestate") != "" {
			leaked.Store(true)
		}
		return http.StatusOK
	})
	srv := startServer(t, t.TempDir(), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_BSP_SCHEDULE_DELAY=50"})
	c, _ := srv.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace Chapel")
	createEndpoint(t, c, hooks.URL, "enrollment.created")

	// The partner's request continues the partner's trace.
	partnerTrace, partnerSpan := randomHex(16), randomHex(8)
	const phone = "+12025550100"
	resp := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, phone, "pct", "3", "https://partner.example/back"),
		apitest.Header{"traceparent": "00-" + partnerTrace + "-" + partnerSpan + "-01"})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create session: %d %s", resp.Status, resp.Body)
	}
	var s sessionResponse
	resp.JSON(t, &s)

	// So does the donor's browser, on every page of the flow.
	donorTrace, donorSpan := randomHex(16), randomHex(8)
	d := newDonorBrowser(t, s.URL, traceparentTransport("00-"+donorTrace+"-"+donorSpan+"-01"))
	verifiedDonor(t, d)
	d.connectPayroll("user_good").expect(t, http.StatusOK, "You're all set")
	waitFor(t, 15*time.Second, "enrollment.created delivered", func() bool { return hooks.count() > 0 })
	delivered := hooks.deliveries()[0]

	var deliver *tracepb.Span
	waitFor(t, 15*time.Second, "the delivery attempt's span", func() bool {
		deliver = otlp.find(func(sp *tracepb.Span) bool {
			return sp.Name == "webhook.deliver" && attr(sp, "giving.event_id") == delivered.EventID
		})
		return deliver != nil
	})

	// The session's request: the server span continues the partner's trace,
	// the use case and the append are its children.
	server := otlp.wait(t, "the session request's span", func(sp *tracepb.Span) bool {
		return sp.Name == "POST /v1/donor_sessions" && hex.EncodeToString(sp.TraceId) == partnerTrace
	})
	if hex.EncodeToString(server.ParentSpanId) != partnerSpan || server.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		attr(server, "http.route") != "/v1/donor_sessions" || attrInt(server, "http.response.status_code") != http.StatusCreated {
		t.Errorf("session request span: %v", server)
	}
	useCase := otlp.wait(t, "the session use case's span", childOf(server, "app.CreateSession"))
	otlp.wait(t, "the session's append", childOf(useCase, "ledger.append"))

	// The donor's payroll form continues the donor's trace: it opens the
	// payroll vendor's widget on the switch.
	request := otlp.wait(t, "the payroll form's request", func(sp *tracepb.Span) bool {
		return sp.Name == "POST /flow/{token}/payroll" && hex.EncodeToString(sp.TraceId) == donorTrace
	})
	if hex.EncodeToString(request.ParentSpanId) != donorSpan {
		t.Errorf("the payroll form's request: %v", request)
	}
	otlp.wait(t, "the payroll use case", childOf(request, "app.StartPayroll"))

	// The enrollment: delivery → (link) append → use case → the payroll
	// vendor's webhook, a trace of its own (Truv sends no trace context).
	if deliver.Kind != tracepb.Span_SPAN_KIND_CLIENT || attr(deliver, "giving.outcome") != "succeeded" ||
		attr(deliver, "giving.event_type") != "enrollment.created" || attrInt(deliver, "http.response.status_code") != http.StatusOK {
		t.Errorf("delivery span: %v", deliver)
	}
	if len(deliver.ParentSpanId) != 0 || len(deliver.Links) != 1 || bytes.Equal(deliver.TraceId, deliver.Links[0].TraceId) {
		t.Fatalf("the delivery attempt should start its own trace, linked to the append: %v", deliver)
	}
	appended := otlp.wait(t, "the append the delivery links to", func(sp *tracepb.Span) bool {
		return bytes.Equal(sp.SpanId, deliver.Links[0].SpanId)
	})
	if appended.Name != "ledger.append" || attr(appended, "giving.event_type") != "enrollment.created" ||
		attr(appended, "giving.event_id") != delivered.EventID || attr(appended, "giving.result") != "ok" {
		t.Errorf("linked span: %v", appended)
	}
	vendor := otlp.wait(t, "the vendor webhook's use case", func(sp *tracepb.Span) bool { return bytes.Equal(sp.SpanId, appended.ParentSpanId) })
	if vendor.Name != "app.ReceiveVendorEvent" {
		t.Errorf("the append's parent is %q, want app.ReceiveVendorEvent", vendor.Name)
	}
	edge := otlp.wait(t, "the payroll vendor's webhook request", func(sp *tracepb.Span) bool { return bytes.Equal(sp.SpanId, vendor.ParentSpanId) })
	if edge.Name != "POST /edge/payroll" || len(edge.ParentSpanId) != 0 || hex.EncodeToString(edge.TraceId) == donorTrace {
		t.Errorf("the use case's parent: %v", edge)
	}
	// The projector's apply of that event links to the same append.
	otlp.wait(t, "the projector's apply linked to the append", func(sp *tracepb.Span) bool {
		if sp.Name != "projector.apply" {
			return false
		}
		for _, l := range sp.Links {
			if bytes.Equal(l.SpanId, appended.SpanId) {
				return true
			}
		}
		return false
	})

	// The partner sees nothing of it; the traces hold no phone or token.
	if leaked.Load() {
		t.Error("a webhook delivery carried a trace header to the partner")
	}
	if bytes.Contains(delivered.Body, []byte(donorTrace)) || bytes.Contains(delivered.Body, []byte("trace")) {
		t.Errorf("the delivered envelope holds trace context: %s", delivered.Body)
	}
	raw := otlp.raw()
	sweep(t, "the exported traces", raw, []string{phone})
	if token := strings.TrimPrefix(s.URL, srv.URL+"/flow/"); bytes.Contains(raw, []byte(token)) {
		t.Error("the exported traces hold the flow token")
	}
	if service := otlp.resourceAttr("service.name"); service != "giving" {
		t.Errorf("service.name %q", service)
	}
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what the service
// exports (protobuf, maybe gzipped) and keeps every span.
type otlpReceiver struct {
	URL    string
	mu     sync.Mutex
	spans  []*tracepb.Span
	bodies [][]byte
	res    map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{res: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	return o
}

func (o *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "OTLP/HTTP protobuf traces only", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.bodies = append(o.bodies, raw)
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			o.res[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (o *otlpReceiver) find(match func(*tracepb.Span) bool) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, sp := range o.spans {
		if match(sp) {
			return sp
		}
	}
	return nil
}

// wait returns the first span that matches, waiting for the exporter.
func (o *otlpReceiver) wait(t *testing.T, what string, match func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	var found *tracepb.Span
	waitFor(t, 10*time.Second, what, func() bool {
		found = o.find(match)
		return found != nil
	})
	return found
}

func (o *otlpReceiver) raw() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Join(o.bodies, nil)
}

func (o *otlpReceiver) resourceAttr(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.res[key]
}

// childOf matches a span named name whose parent is parent.
func childOf(parent *tracepb.Span, name string) func(*tracepb.Span) bool {
	return func(sp *tracepb.Span) bool {
		return sp.Name == name && bytes.Equal(sp.ParentSpanId, parent.SpanId) && bytes.Equal(sp.TraceId, parent.TraceId)
	}
}

func attr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func attrInt(sp *tracepb.Span, key string) int64 {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// traceparentTransport sends every request with a W3C traceparent header,
// as a traced browser or client would.
type traceparentTransport string

func (tp traceparentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", string(tp))
	return http.DefaultTransport.RoundTrip(r)
}
