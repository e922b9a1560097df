package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/telemetry"
)

type ctxKey int

const ctxInfo ctxKey = 0

// requestInfo travels with a request. Inner middleware fills in what it
// learns (the route, the caller) so the access log written by the outermost
// layer can report it.
type requestInfo struct {
	id        string
	log       zerolog.Logger
	route     string
	principal *projections.Principal
}

func info(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(ctxInfo).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{log: zerolog.Nop()}
}

func requestID(ctx context.Context) string { return info(ctx).id }

func logger(ctx context.Context) *zerolog.Logger { return &info(ctx).log }

func principalFrom(ctx context.Context) (projections.Principal, bool) {
	p := info(ctx).principal
	if p == nil {
		return projections.Principal{}, false
	}
	return *p, true
}

// statusWriter remembers what was written, for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status the client got: 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// endRequestSpan names the span after the route template, as OpenTelemetry's
// HTTP conventions do, and ends it; a 5xx marks it failed.
func endRequestSpan(span trace.Span, ri *requestInfo, method string, code int) {
	method = telemetry.HTTPMethod(method)
	span.SetName(method + " " + ri.route)
	span.SetAttributes(
		telemetry.Attr("http.request.method", method), telemetry.Attr("http.route", ri.route),
		attribute.Int("http.response.status_code", code),
	)
	if p := ri.principal; p != nil {
		span.SetAttributes(telemetry.Attr("giving.partner_id", p.PartnerID))
	}
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// observe gives every request an id, a Request-Id header, panic recovery and
// one access-log line. The line holds the route template, never the raw path
// (hosted-flow paths carry secret tokens), and never a body, a header value,
// a query string, a key or a phone number.
//
// It also starts the request's span (continuing the trace of a W3C
// traceparent header, if the request has one), adds the trace id to every
// log line of the request, and records the request's metrics. The span, like
// the log, holds the route template and never the path.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &requestInfo{id: domain.NewID("req_"), route: "(unmatched)"}
		ctx, span := telemetry.Start(telemetry.Extract(r.Context(), r.Header), "HTTP request", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(telemetry.Attr("giving.request_id", ri.id)))
		logCtx := s.log.With().Str("request_id", ri.id)
		if id := telemetry.TraceID(ctx); id != "" {
			logCtx = logCtx.Str("trace_id", id)
		}
		ri.log = logCtx.Logger()
		r = r.WithContext(context.WithValue(ctx, ctxInfo, ri))
		w.Header().Set("Request-Id", ri.id)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				ri.log.Error().Interface("panic", v).Bytes("stack", debug.Stack()).Msg("handler panicked")
				if sw.status == 0 {
					writeProblem(sw, r, domain.ProblemInternal, "", nil)
				}
			}
			d := time.Since(start)
			s.accessLog(ri, r, sw, d)
			s.cfg.Metrics.HTTPRequest(ctx, ri.route, r.Method, sw.code(), d)
			endRequestSpan(span, ri, r.Method, sw.code())
		}()
		// A read after a write on this instance sees the write, though
		// the write's use case answered without waiting for the
		// projections (app.Service.SeeWrites). A write waits only where
		// its use case reads what such a write made (a church just
		// imported), so one that reads nothing of it is never held up
		// by the projections.
		// Liveness answers whatever the projections do: a projector the
		// watchdog is restarting is not a reason to restart the process.
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path != "/healthz" && s.app.SeeWrites(r.Context()) != nil {
			writeError(sw, r, fmt.Errorf("%w: the projections are behind this instance's writes", domain.ErrUnavailable))
			return
		}
		next.ServeHTTP(sw, r)
	})
}

// routeName records the matched route's template for the access log.
func routeName(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := mux.CurrentRoute(r); m != nil {
			if t, err := m.GetPathTemplate(); err == nil {
				info(r.Context()).route = t
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) accessLog(ri *requestInfo, r *http.Request, sw *statusWriter, d time.Duration) {
	ev := ri.log.Info().
		Str("method", r.Method).
		Str("route", ri.route).
		Int("status", sw.status).
		Int("bytes", sw.bytes).
		Float64("duration_ms", float64(d.Microseconds())/1000).
		Str("remote", remoteHost(r))
	if p := ri.principal; p != nil {
		ev = ev.Str("partner_id", p.PartnerID).Str("key_id", p.KeyID)
	}
	ev.Msg("request")
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
