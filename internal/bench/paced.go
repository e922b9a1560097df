package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partnergiving/giving/internal/openloop"
)

// The paced write path: each workload driven at a steady rate on one key,
// as an open loop (each request due at its own time, whatever the ones
// before it are doing), the way partners' traffic arrives: a stall shows
// in the p99 instead of slowing the load down, as it would with clients
// that wait for their answers.

// slowRequest is the latency past which a paced request counts as slow.
const slowRequest = 100 * time.Millisecond

// Paced is one workload at a steady rate.
type Paced struct {
	Name string `json:"name"`
	// Target is the rate asked, in requests a second.
	Target float64 `json:"target_rate"`
	Measure
	// Max is the slowest request, in milliseconds; Slow counts those over
	// 100 ms; Skipped those due while pacedSlots requests were under way.
	Max     float64 `json:"max_ms"`
	Slow    int     `json:"slow"`
	Skipped int     `json:"skipped"`
	// Stages is where the time went (stages.go): a stall shows in a
	// stage's p99 and max.
	Stages []Stage `json:"stages,omitempty"`
}

// pace drives req at rate for d on tenant t, as an open loop.
func pace(ctx context.Context, client *http.Client, base string, t tenant, rate float64, d time.Duration, req request, seq *atomic.Int64) Paced {
	n := int(rate * d.Seconds())
	var (
		mu     sync.Mutex
		lats   = make([]time.Duration, 0, n)
		errs   int
		firstE string
	)
	skipped, elapsed := openloop.Run(ctx, n, rate, pacedSlots, func(int) {
		path, body := req(t, int(seq.Add(1)))
		at := time.Now()
		status, resp, err := post(ctx, client, base, t.key, path, body)
		took := time.Since(at)
		mu.Lock()
		defer mu.Unlock()
		lats = append(lats, took)
		if err != nil || status/100 != 2 {
			errs++
			if firstE == "" {
				firstE = fmt.Sprintf("%d %v %.200s", status, err, resp)
			}
		}
	})
	p := Paced{Target: rate, Skipped: skipped}
	for _, l := range lats {
		if l > slowRequest {
			p.Slow++
		}
		p.Max = max(p.Max, ms(l))
	}
	p.Measure = latencies(lats, elapsed, Measure{Errors: errs, FirstError: firstE})
	return p
}

// pacedWrites measures every workload paced, on svc's first tenant.
func (r *Report) pacedWrites(ctx context.Context, client *http.Client, svc *service, t tenant, seq *atomic.Int64) {
	for _, wl := range workloads {
		r.progress("service: %s paced at %.0f/s for %s", wl.name, r.opts.PacedRate, r.opts.PacedDuration)
		stop := recordStages()
		p := pace(ctx, client, svc.base, t, r.opts.PacedRate, r.opts.PacedDuration, wl.req, seq)
		p.Name, p.Stages = wl.name, stop(p.Requests)
		r.progress("  p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over 100 ms, %d errors, %d skipped", p.P50, p.P99, p.Max, p.Slow, p.Errors, p.Skipped)
		r.Paced = append(r.Paced, p)
	}
}
