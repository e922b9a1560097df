package telemetry

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the operators' listener: /metrics in the Prometheus text
// format (OpenMetrics, with trace exemplars, to a scraper that asks for it)
// and, when withPprof is set, Go's profiler under /debug/pprof/. It belongs
// on its own listener, never on the public API.
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A collector that fails (the ledger not answering) must not hide
		// every other metric.
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	}))
	if withPprof {
		// Not /debug/pprof/cmdline: the command line may hold secrets
		// (--master-key, --stripe-webhook-secret, --truv-secret, ...).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found: this listener serves /metrics", http.StatusNotFound)
	})
	return mux
}
