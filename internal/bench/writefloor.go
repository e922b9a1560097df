package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
)

// The write path's floor: the bench's clients, over the same loopback HTTP
// and with the same requests, against a handler that does only what a
// one-row import must: decode the request, decide the import
// (domain.ImportChurches) and append its event through the ledger's own
// append (group commit, guard, the Idempotency-Key as dedup id) to a fresh
// ledger with the service's settings. A partner's church catalogue is one
// aggregate, appended one at a time as the service appends it, so with one
// key the floor waits for that aggregate's turn and with 16 keys appends 16
// at once. Nothing is authenticated, projected, remembered for a retry or
// rate limited: what the service does beyond this is what its ratio loses
// against the floor's.

// floorWorkload names the floor's rows.
const floorWorkload = "floor: one-row import, decoded and appended"

// floorPartner is one partner's catalogue as the floor appends to it.
type floorPartner struct {
	id   string
	mu   sync.Mutex
	last uint64 // the catalogue's last sequence
}

// writeFloor measures the floor with all clients on one key, then on one key
// each, as writePath measures the service.
func (r *Report) writeFloor(ctx context.Context, dir string) error {
	l, closeLedger, err := probe.OpenScratch(ctx, dir)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer closeLedger()
	tenants := make([]tenant, r.opts.Clients)
	partners := map[string]*floorPartner{}
	for i := range tenants {
		tenants[i].key = "floor-" + strconv.Itoa(i)
		partners[tenants[i].key] = &floorPartner{id: domain.NewID(domain.PrefixPartner)}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	srv := &http.Server{Handler: floorHandler(l, partners), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * r.opts.Clients}, Timeout: 30 * time.Second}
	seq := &atomic.Int64{}
	imports := workloads[1].req
	for _, keys := range []int{1, r.opts.Clients} {
		r.progress("floor: one-row imports decoded and appended, %d clients on %d key(s), %s", r.opts.Clients, keys, r.opts.Duration)
		w, err := r.measureWrites(ctx, floorWorkload, l, client, base, tenants[:keys], r.opts.Clients, imports, seq)
		if err != nil {
			return err
		}
		r.Floor = append(r.Floor, w)
	}
	r.progress("floor: one client, %s", r.opts.Duration)
	w, err := r.measureWrites(ctx, floorWorkload, l, client, base, tenants[:1], 1, imports, seq)
	if err != nil {
		return err
	}
	r.FloorOneClient = &w
	if r.opts.PacedRate > 0 {
		// The disk's own stalls at this pace, with the HTTP of the
		// service's requests around each append and nothing else.
		r.progress("floor: paced at %.0f/s for %s", r.opts.PacedRate, r.opts.PacedDuration)
		p := pace(ctx, client, base, tenants[0], r.opts.PacedRate, r.opts.PacedDuration, imports, seq)
		p.Name = floorWorkload
		r.progress("  p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d over 100 ms, %d errors, %d skipped", p.P50, p.P99, p.Max, p.Slow, p.Errors, p.Skipped)
		r.PacedFloor = &p
	}
	return nil
}

// floorHandler answers a one-row import as the floor does: the partner
// named by the bearer key, the rows decoded, the import decided and its
// event appended after the catalogue's last.
func floorHandler(l *eventlog.Ledger, partners map[string]*floorPartner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := partners[strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")]
		if p == nil {
			http.Error(w, "unknown key", http.StatusUnauthorized)
			return
		}
		var body struct {
			Churches []struct {
				Name string `json:"name"`
			} `json:"churches"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rows := make([]domain.ImportRow, len(body.Churches))
		for i, c := range body.Churches {
			rows[i].Name = c.Name
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		ev, results, err := domain.ImportChurches(p.id, rows, func(string) bool { return false }, time.Now())
		if err != nil || ev == nil {
			http.Error(w, fmt.Sprint("import: ", err), http.StatusBadRequest)
			return
		}
		a, err := l.Append(req.Context(), *ev, req.Header.Get("Idempotency-Key"), p.last)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.last = a.Record.Seq
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	})
}
