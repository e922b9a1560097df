package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
)

// tenant is one partner's API key and a church of it.
type tenant struct {
	key    string
	church string
}

// request builds one request of a workload: path and JSON body.
type request func(t tenant, n int) (string, any)

var workloads = []struct {
	name string
	req  request
}{
	{"POST /v1/donor_sessions", func(t tenant, n int) (string, any) {
		return "/v1/donor_sessions", map[string]any{
			"church_id": t.church, "donor_phone": phone(n), "mode": "pct", "value": 3, "redirect_url": "https://localhost/done",
		}
	}},
	{"POST /v1/churches/import (1 row)", func(t tenant, n int) (string, any) {
		return "/v1/churches/import", map[string]any{"churches": []map[string]string{{"name": fmt.Sprintf("Bench church %d", n)}}}
	}},
	{"POST /v1/churches/import (1 row, external_id)", func(t tenant, n int) (string, any) {
		return "/v1/churches/import", map[string]any{"churches": []map[string]string{{"name": fmt.Sprintf("Bench church %d", n), "external_id": fmt.Sprintf("bench-%d", n)}}}
	}},
	{"POST /sandbox/simulate/deposit", func(t tenant, n int) (string, any) {
		return "/sandbox/simulate/deposit", map[string]any{"church_id": t.church, "account_ref": "acct_bench", "amount": json.Number(fmt.Sprintf("%d.%02d", 1+n%500, n%100))}
	}},
}

// phone is a distinct valid US number per n, so every session is a new donor.
func phone(n int) string {
	areas := []int{212, 312, 415, 617, 646}
	return fmt.Sprintf("+1%d%03d%04d", areas[n%len(areas)], 200+(n/10000)%800, n%10000)
}

// writePath measures each workload with all clients on one key, then on one
// key each, on one fresh instance.
func (r *Report) writePath(ctx context.Context, dir string) error {
	r.progress("service: starting a fresh instance")
	svc, err := startService(ctx, filepath.Join(dir, "service"), r.opts.Memory)
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	defer svc.close()
	tenants, err := svc.tenants(ctx, r.opts.Clients)
	if err != nil {
		return fmt.Errorf("service set-up: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * r.opts.Clients}, Timeout: 30 * time.Second}
	seq := &atomic.Int64{}
	for _, wl := range workloads {
		for _, keys := range []int{1, r.opts.Clients} {
			r.progress("service: %s, %d clients on %d key(s), %s", wl.name, r.opts.Clients, keys, r.opts.Duration)
			w, err := r.measureWrites(ctx, wl.name, svc.st.Ledger, client, svc.base, tenants[:keys], r.opts.Clients, wl.req, seq)
			if err != nil {
				return err
			}
			r.Service = append(r.Service, w)
		}
	}
	for _, wl := range workloads {
		r.progress("service: %s, one client, %s, then its stages", wl.name, r.opts.Duration)
		w, err := r.measureWrites(ctx, wl.name, svc.st.Ledger, client, svc.base, tenants[:1], 1, wl.req, seq)
		if err != nil {
			return err
		}
		stop := recordStages()
		m := drive(ctx, client, []string{svc.base}, tenants[:1], 1, stagesFor(r.opts.Duration), 0, wl.req, seq)
		r.OneClient = append(r.OneClient, OneClient{Workload: w, Stages: stop(m.Requests)})
	}
	if r.opts.PacedRate > 0 {
		r.pacedWrites(ctx, client, svc, tenants[0], seq)
	}
	return nil
}

// stagesFor is how long a workload's stage breakdown runs: long enough
// for a few thousand requests, and no longer than the run's measurements.
func stagesFor(d time.Duration) time.Duration { return min(d, 2*time.Second) }

// measureWrites drives clients' requests at base for the run's
// duration, each client on one of tenants, and measures them, with the
// synced writes of l (the ledger the requests append to) and the process's
// CPU time a request.
func (r *Report) measureWrites(ctx context.Context, name string, l *eventlog.Ledger, client *http.Client, base string, tenants []tenant, clients int, req request, seq *atomic.Int64) (Workload, error) {
	before, err := probe.SyncedWrites(ctx, l)
	if err != nil {
		return Workload{}, err
	}
	stopProfiles, err := r.startProfiles(name, clients, len(tenants))
	if err != nil {
		return Workload{}, err
	}
	cpu := processCPU()
	m := drive(ctx, client, []string{base}, tenants, clients, r.opts.Duration, r.opts.WriteRate, req, seq)
	used := processCPU() - cpu
	if err := stopProfiles(); err != nil {
		return Workload{}, err
	}
	after, err := probe.SyncedWrites(ctx, l)
	if err != nil {
		return Workload{}, err
	}
	w := Workload{Name: name, Clients: clients, Keys: len(tenants), Measure: m}
	if m.Requests > 0 {
		w.SyncedWrites = float64(after-before) / float64(m.Requests)
		w.CPUMicros = float64(used.Microseconds()) / float64(m.Requests)
	}
	r.progress("  %.0f req/s, p50 %.1f ms, p99 %.1f ms, %.2f synced writes/request, %.0f µs CPU/request, %d errors", m.Rate, m.P50, m.P99, w.SyncedWrites, w.CPUMicros, m.Errors)
	return w, nil
}

// tenants onboards n partners, each with a key and a church.
func (s *service) tenants(ctx context.Context, n int) ([]tenant, error) {
	out := make([]tenant, n)
	for i := range out {
		_, key, err := s.st.Operators.CreatePartner(ctx, fmt.Sprintf("Bench partner %d", i), []string{"https://localhost"}, domain.Brand{})
		if err != nil {
			return nil, err
		}
		out[i].key = key.Secret
	}
	if err := s.st.Projector.CatchUp(ctx); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range out {
		var res struct {
			Results []struct {
				Church struct {
					ID string `json:"id"`
				} `json:"church"`
			} `json:"results"`
		}
		status, body, err := post(ctx, client, s.base, out[i].key, "/v1/churches/import", map[string]any{"churches": []map[string]string{{"name": "Bench Chapel"}}})
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("import answered %d: %s", status, body)
		}
		if err == nil {
			err = json.Unmarshal(body, &res)
		}
		if err != nil || len(res.Results) != 1 || res.Results[0].Church.ID == "" {
			return nil, fmt.Errorf("church for tenant %d: %v %s", i, err, body)
		}
		out[i].church = res.Results[0].Church.ID
	}
	return out, nil
}

// drive runs clients concurrent loops of requests for d, client i using
// tenant i mod len(tenants) and sending to bases[i mod len(bases)] (the
// instances a load balancer would spread them over), and measures them.
// With a positive rate the clients together send at most rate requests a
// second, each paced on its own (a client that falls behind does not burst
// to catch up).
func drive(ctx context.Context, client *http.Client, bases []string, tenants []tenant, clients int, d time.Duration, rate float64, req request, seq *atomic.Int64) Measure {
	var (
		mu     sync.Mutex
		lats   []time.Duration
		errs   int
		wg     sync.WaitGroup
		firstE string
	)
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, base := tenants[c%len(tenants)], bases[c%len(bases)]
			var mine []time.Duration
			bad := 0
			var badBody string
			var interval time.Duration
			if rate > 0 {
				interval = time.Duration(float64(clients) / rate * float64(time.Second))
			}
			next := time.Now()
			for time.Now().Before(end) && ctx.Err() == nil {
				if interval > 0 {
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait)
					}
					next = later(next.Add(interval), time.Now())
				}
				path, body := req(t, int(seq.Add(1)))
				at := time.Now()
				status, resp, err := post(ctx, client, base, t.key, path, body)
				mine = append(mine, time.Since(at))
				if err != nil || status/100 != 2 {
					bad++
					if badBody == "" {
						badBody = fmt.Sprintf("%d %v %.200s", status, err, resp)
					}
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			if firstE == "" {
				firstE = badBody
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return latencies(lats, time.Since(start), Measure{Errors: errs, FirstError: firstE})
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// post sends one partner request with a fresh Idempotency-Key.
func post(ctx context.Context, client *http.Client, base, key, path string, body any) (int, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "bench-"+ksuid.New().String()+fmt.Sprint(rand.Uint32()))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
