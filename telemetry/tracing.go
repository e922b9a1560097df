package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// exporting is set once Setup has installed an exporter.
var exporting atomic.Bool

// tracerName names the service's instrumentation.
const tracerName = "github.com/partnergiving/giving"

// propagator is W3C Trace Context: the traceparent header on requests, and
// the same header stored with each ledger event.
var propagator = propagation.TraceContext{}

// TraceparentHeader is the W3C header that carries a span's context.
const TraceparentHeader = "traceparent"

// Start begins a span on the service's tracer. Until Setup installs an
// exporter the global provider is a no-op and spans cost next to nothing.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.Tracer(tracerName).Start(ctx, name, opts...)
}

// End ends span, marking it failed when err is not nil. The error's text
// is recorded: errors never carry a body, a secret or a phone.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Extract continues the trace a request's traceparent header names, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// TraceParent is the W3C traceparent of ctx's span, to store with what the
// span produces (a ledger event), or "" when the span is not recorded.
func TraceParent(ctx context.Context) string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[TraceparentHeader]
}

// LinkTo is a link to the span a stored traceparent names.
func LinkTo(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{TraceparentHeader: traceparent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// TraceID is the id of ctx's recorded trace for a log line, or "".
func TraceID(ctx context.Context) string {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return ""
	}
	return span.SpanContext().TraceID().String()
}

// Attr is shorthand for a string span attribute.
func Attr(key, value string) attribute.KeyValue { return attribute.String(key, value) }

// Service describes this process to the trace backend.
type Service struct {
	Version     string
	Environment string
	Instance    string
}

// TracingEnabled reports whether the environment asks for traces: an OTLP
// endpoint is set and the SDK is not disabled.
func TracingEnabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup exports spans by OTLP over HTTP when the environment asks for
// traces (TracingEnabled), configured by the standard OTEL_* variables
// (endpoint, headers, TLS, timeout, sampler, batch delay, resource
// attributes), and returns the function that flushes and stops the
// exporter. When traces are off it installs nothing and shutdown is a
// no-op.
func Setup(ctx context.Context, svc Service) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !TracingEnabled() {
		return noop, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" && p != "http/json" {
				return noop, fmt.Errorf("%s=%s: traces are exported over OTLP/HTTP only (http/protobuf or http/json)", v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(
			semconv.ServiceName("giving"),
			semconv.ServiceVersion(svc.Version),
			semconv.ServiceInstanceID(svc.Instance),
			semconv.DeploymentEnvironmentNameKey.String(svc.Environment),
		),
		resource.WithTelemetrySDK(),
		// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	exporting.Store(true)
	return tp.Shutdown, nil
}
