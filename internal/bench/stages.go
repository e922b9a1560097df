package bench

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The stage breakdown of a request: while it is on, every span the service
// starts (the HTTP request, the use case, the idempotency claim and its
// completion, the recall, the phone's sealing, the ledger append, the wait
// for the local projections, the projector's apply) is recorded by name,
// so that one client's requests show where their time goes, stage by
// stage. Spans nest (the use case holds the append), so the stages' times
// add up to more than the request's. It is measured apart from the CPU and
// latency figures: recording spans costs CPU of its own, and the ledger's
// events then carry a traceparent.

// Stage is one kind of span in a request.
type Stage struct {
	Name string `json:"name"`
	// PerRequest is how many such spans a request had, on average.
	PerRequest float64 `json:"per_request"`
	// P50, P99, Max and Mean are its duration in milliseconds.
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// stageRecorder collects the durations of ended spans by name.
type stageRecorder struct {
	mu   sync.Mutex
	durs map[string][]time.Duration
}

func (s *stageRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *stageRecorder) Shutdown(context.Context) error                  { return nil }
func (s *stageRecorder) ForceFlush(context.Context) error                { return nil }

func (s *stageRecorder) OnEnd(span sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.durs[span.Name()] = append(s.durs[span.Name()], span.EndTime().Sub(span.StartTime()))
}

// recordStages records every span the process starts until the returned
// function is called, which restores the tracer provider there was and
// returns the stages of requests requests, slowest mean first.
func recordStages() func(requests int) []Stage {
	rec := &stageRecorder{durs: map[string][]time.Duration{}}
	before := otel.GetTracerProvider()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	return func(requests int) []Stage {
		otel.SetTracerProvider(before)
		_ = tp.Shutdown(context.Background())
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var out []Stage
		for name, ds := range rec.durs {
			if requests == 0 {
				break
			}
			slices.Sort(ds)
			var sum time.Duration
			for _, d := range ds {
				sum += d
			}
			out = append(out, Stage{Name: name, PerRequest: float64(len(ds)) / float64(requests), P50: ms(ds[len(ds)/2]), P99: ms(ds[len(ds)*99/100]),
				Max: ms(ds[len(ds)-1]), Mean: ms(sum / time.Duration(len(ds)))})
		}
		slices.SortFunc(out, func(a, b Stage) int { return cmp.Compare(b.Mean, a.Mean) })
		return out
	}
}
