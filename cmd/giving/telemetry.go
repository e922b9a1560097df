package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/telemetry"
)

// telemetryFlags configure what operators see of "giving serve" besides
// its logs: the metrics listener and the profiler on it. Traces follow the
// standard OTEL_* variables (startTracing).
type telemetryFlags struct {
	metricsAddr string
	pprof       bool
}

func (f *telemetryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "listen address of /metrics for Prometheus, apart from the API, such as 127.0.0.1:9464 (empty, the default: none, so that two stacks on one host never collide)")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve Go's profiler under /debug/pprof/ on the metrics listener")
}

// listen opens the metrics listener, so that a taken address stops serve
// before anything else starts.
func (f *telemetryFlags) listen() (net.Listener, error) {
	if f.metricsAddr == "" {
		if f.pprof {
			return nil, usageError{"--pprof is served on the metrics listener: it needs --metrics-addr"}
		}
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s (--metrics-addr): %w; give each instance on a host its own --metrics-addr, or none with --metrics-addr ''", f.metricsAddr, err)
	}
	return ln, nil
}

// serveMetrics serves /metrics (and the profiler, with --pprof) on ln and
// returns the function that stops it. A nil ln serves nothing.
func (f *telemetryFlags) serveMetrics(ln net.Listener, m *telemetry.Metrics, stdout io.Writer, log zerolog.Logger) func() {
	if ln == nil {
		return func() {}
	}
	srv := &http.Server{Handler: m.Handler(f.pprof), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics listener stopped")
		}
	}()
	fmt.Fprintf(stdout, "metrics for Prometheus on http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

// startTracing exports traces by OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is
// set, and returns the function that flushes them at exit.
func startTracing(ctx context.Context, env, instance string, log zerolog.Logger) (func(), error) {
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.Service{Version: version, Environment: env, Instance: instance})
	if err != nil {
		return nil, usageError{"traces: " + err.Error()}
	}
	if telemetry.TracingEnabled() {
		log.Info().Msg("exporting traces by OTLP")
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn().Err(err).Msg("traces not flushed")
		}
	}, nil
}
