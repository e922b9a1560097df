package eventlog_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// latencies collects per-operation durations and reports their percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(p float64) float64 {
		return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAppend measures one synced append to the embedded ledger (each
// write is fsynced before it is acknowledged), one writer at a time.
func BenchmarkAppend(b *testing.B) {
	benchmarkAppendWriters(b, 1, true)
}

// BenchmarkAppendParallel is the same with 16 concurrent writers.
func BenchmarkAppendParallel(b *testing.B) {
	benchmarkAppendWriters(b, 16, true)
}

// BenchmarkAppendGroupCommit measures synced appends from many concurrent
// writers, each a new aggregate, with the ledger's group commit off (every
// append its own synced write) and on (past 16 in flight, the appends
// queued behind share atomic batches):
//
//	go test ./eventlog -run '^$' -bench AppendGroupCommit -benchtime 5s -count 3
func BenchmarkAppendGroupCommit(b *testing.B) {
	for _, writers := range []int{16, 64, 256} {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("writers=%d/group-commit=%v", writers, on)
			b.Run(name, func(b *testing.B) { benchmarkAppendWriters(b, writers, on) })
		}
	}
}

func benchmarkAppendWriters(b *testing.B, writers int, groupCommit bool) {
	ctx := context.Background()
	cfg := eventlog.Config{Env: domain.Sandbox, DataDir: b.TempDir()}
	if !groupCommit {
		cfg.GroupCommitAt = math.MaxInt
	}
	l, err := eventlog.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var (
		lat  latencies
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				id := domain.NewID(domain.PrefixPartner)
				ev := domain.NewEvent(id, id, "", time.Now(), &domain.PartnerCreated{
					Name: "Benchmark Partner", Environment: "sandbox", RedirectOrigins: []string{"https://bench.example"},
				})
				start := time.Now()
				if _, err := l.Append(ctx, ev, "", 0); err != nil {
					b.Error(err)
					return
				}
				lat.add(time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.report(b)
}
