package eventlogtest

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a NATS JetStream cluster running in the test's process.
type Cluster struct {
	// URLs are the nodes' client URLs, with the credentials their
	// configuration asks of clients.
	URLs    []string
	tb      testing.TB
	opts    []*server.Options
	servers []*server.Server
}

// URL is every node's client URL in one, as --nats-url takes them.
func (c *Cluster) URL() string { return strings.Join(c.URLs, ",") }

// Stop shuts node i (from 0) down, as losing a machine would.
func (c *Cluster) Stop(i int) {
	c.servers[i].Shutdown()
	c.servers[i].WaitForShutdown()
}

// Restart starts node i again, on its ports and its store, after Stop.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	c.servers[i] = run(c.tb, c.opts[i].Clone(), 30*time.Second)
}

// Leader is the node leading the replicas of stream (a KV bucket's stream
// is KV_<bucket>), or -1 while none does.
func (c *Cluster) Leader(stream string) int {
	for i, s := range c.servers {
		if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Serving is the node holding a client connection whose name contains
// client, or -1 when none does.
func (c *Cluster) Serving(client string) int {
	for i, s := range c.servers {
		if !s.Running() {
			continue
		}
		conns, err := s.Connz(&server.ConnzOptions{Limit: 1024})
		if err != nil {
			continue
		}
		for _, ci := range conns.Conns {
			if strings.Contains(ci.Name, client) {
				return i
			}
		}
	}
	return -1
}

// Current reports whether every node runs, the cluster has its meta leader,
// and each of streams has a leader and every replica caught up: a node may
// be lost again without losing a quorum.
func (c *Cluster) Current(streams ...string) bool {
	for _, s := range c.servers {
		if !s.Running() || !s.JetStreamIsCurrent() {
			return false
		}
		for _, st := range streams {
			if !s.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, st) {
				return false
			}
		}
	}
	for _, st := range streams {
		if c.Leader(st) < 0 {
			return false
		}
	}
	return true
}

// StartCluster runs the cluster configured by the files nats-1.conf,
// nats-2.conf, ... in confDir (deploy/nats), as shipped: only the hosts, the
// ports and the store move to loopback and the test's temporary directory.
// Routes are taken from the first file, in order. It returns once the
// cluster can place a stream with a replica on every node, and stops the
// nodes when the test ends.
func StartCluster(tb testing.TB, confDir string) *Cluster {
	tb.Helper()
	c := LaunchCluster(tb, confDir)
	WaitFor(tb, 60*time.Second, "the JetStream cluster to elect a leader", func() bool {
		for _, s := range c.servers {
			if s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	c.waitPlacement(tb, len(c.servers))
	return c
}

// LaunchCluster is StartCluster returning as soon as every node takes
// clients: the cluster has yet to elect its leaders and learn its peers, as
// when a fresh cluster and its clients start together.
func LaunchCluster(tb testing.TB, confDir string) *Cluster {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(confDir, "nats-*.conf"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no nats-N.conf in %s (%v)", confDir, err)
	}
	n := len(files)
	ports := freePorts(tb, 2*n) // routes, then clients: fixed, so a restarted node is where it was
	c := &Cluster{tb: tb, servers: make([]*server.Server, n)}
	var routes []*url.URL
	for i := range n {
		name := fmt.Sprintf("nats-%d.conf", i+1)
		opts, err := server.ProcessConfigFile(filepath.Join(confDir, name))
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if i == 0 {
			for _, r := range opts.Routes {
				r.Host = fmt.Sprintf("127.0.0.1:%d", ports[len(routes)])
				routes = append(routes, r)
			}
		}
		opts.Routes = routes
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", ports[n+i], 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", ports[i]
		opts.StoreDir = tb.TempDir()
		opts.NoLog, opts.NoSigs = true, true
		c.opts = append(c.opts, opts)
		c.servers[i] = run(tb, opts.Clone(), 30*time.Second)
		u, _ := url.Parse(c.servers[i].ClientURL())
		u.User = url.UserPassword(opts.Username, opts.Password)
		c.URLs = append(c.URLs, u.String())
	}
	return c
}

// waitPlacement waits until a stream of replicas copies can be placed: a
// leader is not enough, every peer must be known and online. It probes with
// one.
func (c *Cluster) waitPlacement(tb testing.TB, replicas int) {
	tb.Helper()
	js, closeJS := connectJS(tb, c.URL())
	defer closeJS()
	WaitFor(tb, 60*time.Second, fmt.Sprintf("the cluster to place a %d-replica stream", replicas), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLACEMENT_PROBE", Subjects: []string{"probe.>"}, Replicas: replicas}); err != nil {
			return false
		}
		return js.DeleteStream(ctx, "PLACEMENT_PROBE") == nil
	})
}
