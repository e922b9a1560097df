// Package bench measures the service against the disk's own limit, in one
// run: the raw synced publish rate of an embedded JetStream with the
// service's settings (the limit), then the service over real HTTP on
// loopback, then the limit again (machines drift; the mean is used). Every
// figure is reported with its ratio to the limit, or to the raw operation it
// stands for, so it carries from one machine to another. The service is
// measured on two sides: the write path (writepath.go) and the read side
// at two ledger sizes (readside.go: the feed, webhook dispatch in
// dispatch.go, replay and memory, with serve's own memory measured in a
// child process in serveproc.go). "giving bench" runs it.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/internal/stack"
)

// DefaultBurst is how many webhook deliveries the dispatch burst measures
// unless told: about a second and a half of deliveries here, long enough
// for the steady rate. The 5,000 it was before ran mostly before the
// projector's catch-up and the collector weighed in, and flattered the
// ratio by about a tenth.
const DefaultBurst = 20000

// DefaultRounds is how many dispatch rounds each ledger size measures
// unless told: the median of three rather than one burst, whose ratio
// moved by ±0.04 between runs at the large size.
const DefaultRounds = 3

// Options configure a run.
type Options struct {
	// Dir is where fresh data directories are made (a temporary directory
	// when empty); everything made is removed afterwards.
	Dir string
	// Duration is how long each measurement runs.
	Duration time.Duration
	// Clients is the number of concurrent clients (and raw publishers).
	Clients int
	// Size is the raw limit's message size in bytes.
	Size int
	// Only is "write" or "read" to measure one side; empty measures both.
	Only string
	// Events is the read side's large ledger size N2 in public events
	// (default 1,000,000); the small one N1 is 10,000, or a tenth of N2.
	Events int
	// Partners share the read side's events (default 1,000).
	Partners int
	// Burst is how many webhook deliveries the burst measures (default
	// DefaultBurst).
	Burst int
	// Rounds is how many bursts (each with its bare and fed loops) are
	// measured at each ledger size, each on a service started afresh; the
	// dispatch's figures are their medians (default DefaultRounds).
	Rounds int
	// Memory is the service's memory setting (eventlog.Config.Memory).
	Memory int64
	// HeapProfile, when set, is where the read side writes a heap profile
	// at each ledger size (suffixed with the size), taken while the
	// service serves that ledger: what fills the memory, by allocation site.
	// The bench's process holds the service there, so serve's own, from
	// its child process, is written too (suffixed with .serve. and the size).
	HeapProfile string
	// Serve is the giving executable whose "serve" the read side starts
	// in a child process at each ledger size, to measure serve's own
	// memory (serveproc.go). The read side needs it.
	Serve string
	// BurstProfile, when set, is where the read side writes a CPU profile
	// of each dispatch burst (suffixed with the ledger size): from the
	// service's start to the burst's last delivery, so the dispatcher's
	// cost per delivery can be read apart from the rest of the run; and
	// one of the bare loop it is compared with (suffixed .bare) and of the
	// fed loop (suffixed .fed).
	BurstProfile string
	// ReplayProfile, when set, is where the read side writes a CPU profile
	// of each replay (suffixed with the ledger size) and of the raw read
	// it is compared with (suffixed .raw): the rebuild's whole cost, its
	// ledger server's included, apart from the rest of the run.
	ReplayProfile string
	// WriteRate, when positive, paces the write path's clients to this
	// many requests a second in all (instead of each sending its next
	// request as soon as the last is answered), so that two builds can be
	// compared by CPU per request at the same load: unpaced, the rate
	// follows the machine's other load, and CPU per request falls as the
	// rate rises (larger batches everywhere).
	WriteRate float64
	// WriteProfile, when set, is where the write side writes a CPU, a
	// block and a mutex profile of each of its measurements, suffixed
	// with the workload, its clients and its keys (profiles.go).
	WriteProfile string
	// PacedRate, when positive, also drives each workload on one key at
	// this many requests a second for PacedDuration, as an open loop
	// (paced.go).
	PacedRate     float64
	PacedDuration time.Duration
	// ClusterInstances, when positive, measures the write path on a
	// three-node cluster (cluster.go) through one instance and then
	// through this many.
	ClusterInstances int
	// Progress hears what the run is doing.
	Progress io.Writer
}

// Report is the outcome of a run.
type Report struct {
	Date    time.Time   `json:"date"`
	Limit   LimitReport `json:"limit"`
	Service []Workload  `json:"service,omitempty"`
	// Floor is the write path's floor (writefloor.go): the same clients
	// and one-row imports against a handler that only decodes them and
	// appends their events.
	Floor []Workload `json:"floor,omitempty"`
	// OneClient is each workload with one client on one key, set beside
	// FloorOneClient, the floor's: with no contention for the processor,
	// its latency is the request's chain of waits, which two cores
	// measure as honestly as sixteen.
	OneClient      []OneClient `json:"one_client,omitempty"`
	FloorOneClient *Workload   `json:"floor_one_client,omitempty"`
	// Paced is each workload at a steady rate (Options.PacedRate), and
	// PacedFloor the floor at that rate.
	Paced      []Paced `json:"paced,omitempty"`
	PacedFloor *Paced  `json:"paced_floor,omitempty"`
	// Cluster is the write path on a cluster (Options.ClusterInstances).
	Cluster []ClusterWorkload `json:"cluster,omitempty"`
	Read    *ReadReport       `json:"read,omitempty"`
	Notes   []string          `json:"notes,omitempty"`
	opts    Options
}

// LimitReport is the raw limit, measured before and after the service.
type LimitReport struct {
	Before Measure `json:"before"`
	After  Measure `json:"after"`
	// Rate is the mean of both, what ratios are taken against.
	Rate float64 `json:"rate"`
	P99  float64 `json:"p99_ms"`
	// CPUMicros is the process's CPU time a message (the publishers and
	// the server together), the mean of both measures; Cores is that at
	// the rate: how much of the machine the limit kept busy. Where it is
	// well under the machine's cores, the limit is the server's stores
	// and syncs, one after another, not the processor, while a service
	// over HTTP (its clients beside it) is bound by the processor.
	CPUMicros float64 `json:"cpu_us_per_message"`
	Cores     float64 `json:"cores"`
}

// Measure is a rate and its latencies.
type Measure struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Rate     float64 `json:"rate"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	// FirstError shows the first failed request, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Workload is one service measurement.
type Workload struct {
	Name    string `json:"name"`
	Clients int    `json:"clients"`
	Keys    int    `json:"keys"`
	Measure
	// SyncedWrites is the synced writes stored per request, counted from
	// the streams' sequences.
	SyncedWrites float64 `json:"synced_writes_per_request"`
	// CPUMicros is the process's CPU time (user and system, getrusage) per
	// request over the phase: the service, its NATS server and the clients,
	// which share the process. Steadier than the rate on a busy machine.
	CPUMicros float64 `json:"cpu_us_per_request"`
	// Ratio is Rate over the limit's rate.
	Ratio float64 `json:"ratio"`
	// P99Ratio is P99 over the limit's p99.
	P99Ratio float64 `json:"p99_ratio"`
}

// OneClient is a workload with one client on one key, and where its
// requests' time goes.
type OneClient struct {
	Workload
	// P50OverFloor and CPUOverFloor are its p50 and CPU a request over the
	// floor's at one client.
	P50OverFloor float64 `json:"p50_over_floor"`
	CPUOverFloor float64 `json:"cpu_over_floor"`
	// Stages is its stage breakdown (stages.go), slowest first.
	Stages []Stage `json:"stages"`
}

// Run measures the limit, the service's write path and read side (or the
// one Options.Only names), and the limit again.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Clients <= 0 {
		o.Clients = 16
	}
	if o.Size <= 0 {
		o.Size = 500
	}
	if o.Events <= 0 {
		o.Events = 1_000_000
	}
	if o.Partners <= 1 {
		o.Partners = 1000
	}
	if o.Burst <= 1 {
		o.Burst = DefaultBurst
	}
	if o.Rounds <= 0 {
		o.Rounds = DefaultRounds
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Only != "" && o.Only != "write" && o.Only != "read" {
		return nil, fmt.Errorf("only %q: must be write or read", o.Only)
	}
	if o.Only != "write" && o.Serve == "" {
		return nil, errors.New("the read side needs the giving executable (Options.Serve) to measure serve in its own process")
	}
	dir, err := os.MkdirTemp(o.Dir, "giving-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r := &Report{Date: time.Now().UTC(), opts: o}
	var cpuBefore, cpuAfter float64
	if r.Limit.Before, cpuBefore, err = r.limit(ctx, dir); err != nil {
		return nil, err
	}
	if o.Only != "read" {
		if err := r.writePath(ctx, dir); err != nil {
			return nil, err
		}
		// After the service has stopped: nothing of it runs beside.
		if err := r.writeFloor(ctx, dir); err != nil {
			return nil, err
		}
		if o.ClusterInstances > 0 {
			if err := r.cluster(ctx, dir); err != nil {
				return nil, err
			}
		}
	}
	if o.Only != "write" {
		if err := r.readSide(ctx, dir); err != nil {
			return nil, err
		}
	}
	if r.Limit.After, cpuAfter, err = r.limit(ctx, dir); err != nil {
		return nil, err
	}
	r.Limit.Rate = (r.Limit.Before.Rate + r.Limit.After.Rate) / 2
	r.Limit.P99 = (r.Limit.Before.P99 + r.Limit.After.P99) / 2
	r.Limit.CPUMicros = (cpuBefore + cpuAfter) / 2
	r.Limit.Cores = r.Limit.CPUMicros * r.Limit.Rate / 1e6
	for _, ws := range [][]Workload{r.Service, r.Floor} {
		for i := range ws {
			w := &ws[i]
			w.Ratio = w.Rate / r.Limit.Rate
			w.P99Ratio = w.P99 / r.Limit.P99
		}
	}
	if f := r.FloorOneClient; f != nil {
		for i := range r.OneClient {
			o := &r.OneClient[i]
			o.P50OverFloor, o.CPUOverFloor = o.P50/f.P50, o.CPUMicros/f.CPUMicros
		}
	}
	if r.Read != nil {
		for i := range r.Read.Sizes {
			s := &r.Read.Sizes[i]
			s.PageP99Ratio = s.Page.P99 / r.Limit.P99
			s.Dispatch.PacedP99Ratio = s.Dispatch.Paced.P99 / r.Limit.P99
		}
	}
	return r, nil
}

func (r *Report) progress(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, format+"\n", args...)
}

// limit measures the raw limit, and the process's CPU time a message.
func (r *Report) limit(ctx context.Context, dir string) (Measure, float64, error) {
	r.progress("raw limit: %d synced publishers, %d B, %s", r.opts.Clients, r.opts.Size, r.opts.Duration)
	cpu := processCPU()
	raw, err := probe.MeasureRawLimit(ctx, dir, r.opts.Clients, r.opts.Size, r.opts.Duration)
	if err != nil {
		return Measure{}, 0, fmt.Errorf("raw limit: %w", err)
	}
	var perMessage float64
	if raw.Messages > 0 {
		perMessage = float64((processCPU() - cpu).Microseconds()) / float64(raw.Messages)
	}
	r.progress("  %s, %.0f µs CPU/message", raw, perMessage)
	return Measure{Requests: raw.Messages, Rate: raw.Rate(), P50: ms(raw.P50), P99: ms(raw.P99)}, perMessage, nil
}

// service is one instance serving HTTP on loopback for a run.
type service struct {
	st   *stack.Stack
	srv  *http.Server
	base string
}

// startService starts an instance on dir with the memory setting.
func startService(ctx context.Context, dir string, memory int64) (*service, error) {
	return startInstance(ctx, stack.Config{Ledger: eventlog.Config{Env: domain.Sandbox, DataDir: dir, Memory: memory}})
}

// startInstance starts an instance of cfg, its ledger's settings and
// instance name as given, serving on loopback.
func startInstance(ctx context.Context, cfg stack.Config) (*service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	cfg.Webhooks = dispatcher.Config{Concurrency: hookConcurrency}
	cfg.PublicURL = base
	// The limiter is measured, not the budget: no request is refused.
	cfg.RateLimit = httpapi.RateLimit{PerSecond: 1_000_000, Burst: 1_000_000}
	cfg.Log = zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	st, err := stack.Open(ctx, cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := st.Start(ctx); err != nil {
		st.Close()
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: st.API.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &service{st: st, srv: srv, base: base}, nil
}

func (s *service) close() {
	s.st.API.EndLongPolls()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.st.Close()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
