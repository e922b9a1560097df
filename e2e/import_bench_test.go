package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// BenchmarkImport measures POST /v1/churches/import end to end on one
// instance with the embedded, synced ledger: authentication, the rate limit,
// the Idempotency-Key record (claimed and completed in KV), the append, and
// the wait until the local projections show the write. Each request imports
// one church.
//
//   - serial: one client, one request at a time (latency);
//   - one-partner-16-clients: sixteen clients of one partner, whose imports
//     each reserve an external id of their own;
//   - 16-partners: sixteen clients, each its own partner.
func BenchmarkImport(b *testing.B) {
	ts := startStack(b)
	keys := make([]string, 16)
	for i := range keys {
		_, key, err := ts.Operators.CreatePartner(b.Context(), fmt.Sprintf("Bench %d", i), []string{"https://bench.example"}, domain.Brand{})
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = key.Secret
	}
	ts.waitProjected(b)
	var seq atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(b *testing.B, key string, lat *latencies) {
		i := seq.Add(1)
		req, _ := http.NewRequest(http.MethodPost, ts.URL+importPath, bytes.NewReader(fmt.Appendf(nil, `{"churches":[{"name":"Bench %d","external_id":"bench-%d"}]}`, i, i)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", i))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("status %d", resp.StatusCode)
			return
		}
		lat.add(time.Since(start))
	}

	b.Run("serial", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			post(b, keys[0], &lat)
		}
		lat.report(b, "imports/s")
	})
	b.Run("one-partner-16-clients", func(b *testing.B) {
		var lat latencies
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				post(b, keys[0], &lat)
			}
		})
		lat.report(b, "imports/s")
	})
	b.Run("16-partners", func(b *testing.B) {
		var lat latencies
		var next atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			key := keys[int(next.Add(1)-1)%len(keys)]
			for pb.Next() {
				post(b, key, &lat)
			}
		})
		lat.report(b, "imports/s")
	})
}

// latencies collects per-request durations and reports percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, rate string) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(p float64) float64 { return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(len(l.d))/b.Elapsed().Seconds(), rate)
}
