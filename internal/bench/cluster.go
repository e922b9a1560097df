package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/internal/stack"
)

// The cluster: the write path's workloads on a three-node JetStream
// cluster in this process (every stream and bucket with three replicas,
// each node syncing every write), first through one instance and then
// through several, the clients spread over the instances as a load
// balancer would spread them, all on one key and then on one key each.
// Besides the rate, latencies and CPU a request, it counts the appends the
// ledger refused because another writer came first (each one a retry):
// instances that take turns on an aggregate show here.

// clusterMasterKey is the master key every instance of the cluster shares,
// as instances sharing a ledger must.
const clusterMasterKey = "b3c8d1e2f4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff"

// ClusterWorkload is one workload on the cluster.
type ClusterWorkload struct {
	Workload
	Instances int `json:"instances"`
	// Conflicts is how many appends a request had refused by another
	// writer's (each one a retry), on average.
	Conflicts float64 `json:"append_conflicts_per_request"`
}

// cluster measures every workload on one instance, then on
// Options.ClusterInstances, sharing one cluster.
func (r *Report) cluster(ctx context.Context, dir string) error {
	r.progress("cluster: starting 3 nodes")
	c, err := probe.StartCluster(ctx, filepath.Join(dir, "cluster"))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer c.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * r.opts.Clients}, Timeout: 30 * time.Second}
	seq := &atomic.Int64{}
	for run, n := range []int{1, r.opts.ClusterInstances} {
		if err := r.clusterRun(ctx, filepath.Join(dir, "cluster-run-"+strconv.Itoa(run)), c.URL(), n, client, seq); err != nil {
			return err
		}
	}
	return nil
}

// clusterRun measures every workload through n fresh instances.
func (r *Report) clusterRun(ctx context.Context, dir, url string, n int, client *http.Client, seq *atomic.Int64) error {
	r.progress("cluster: starting %d instance(s)", n)
	var svcs []*service
	defer func() {
		for _, s := range svcs {
			s.close()
		}
	}()
	bases := make([]string, n)
	for i := range n {
		name := fmt.Sprintf("bench-%d", i)
		s, err := startInstance(ctx, stack.Config{
			Ledger:    eventlog.Config{Env: domain.Sandbox, NATSURL: url, Replicas: 3, DataDir: filepath.Join(dir, name), Memory: r.opts.Memory},
			MasterKey: clusterMasterKey, Instance: name,
		})
		if err != nil {
			return fmt.Errorf("cluster instance %d: %w", i, err)
		}
		svcs, bases[i] = append(svcs, s), s.base
	}
	tenants, err := svcs[0].tenants(ctx, r.opts.Clients)
	if err != nil {
		return fmt.Errorf("cluster set-up: %w", err)
	}
	for _, s := range svcs {
		if err := s.st.Projector.CatchUp(ctx); err != nil {
			return err
		}
	}
	for _, wl := range workloads {
		for _, keys := range []int{1, r.opts.Clients} {
			r.progress("cluster: %s, %d clients on %d key(s) over %d instance(s), %s", wl.name, r.opts.Clients, keys, n, r.opts.Duration)
			stopProfiles, err := r.startProfiles(fmt.Sprintf("cluster %di %s", n, wl.name), r.opts.Clients, keys)
			if err != nil {
				return err
			}
			conflicts := appendConflicts(svcs)
			cpu := processCPU()
			m := drive(ctx, client, bases, tenants[:keys], r.opts.Clients, r.opts.Duration, 0, wl.req, seq)
			used := processCPU() - cpu
			if err := stopProfiles(); err != nil {
				return err
			}
			w := ClusterWorkload{Workload: Workload{Name: wl.name, Clients: r.opts.Clients, Keys: keys, Measure: m}, Instances: n}
			if m.Requests > 0 {
				w.CPUMicros = float64(used.Microseconds()) / float64(m.Requests)
				w.Conflicts = (appendConflicts(svcs) - conflicts) / float64(m.Requests)
			}
			r.progress("  %.0f req/s, p50 %.1f ms, p99 %.1f ms, %.0f µs CPU/request, %.3f append conflicts/request, %d errors", m.Rate, m.P50, m.P99, w.CPUMicros, w.Conflicts, m.Errors)
			r.Cluster = append(r.Cluster, w)
		}
	}
	return nil
}

// appendConflicts is how many appends the instances' ledgers had refused
// for another writer's, from their metrics.
func appendConflicts(svcs []*service) float64 {
	var total float64
	for _, s := range svcs {
		total += s.st.Metrics.AppendConflicts()
	}
	return total
}
