package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a NATS JetStream cluster of three nodes in this process, each
// storing under its own directory and syncing every write
// (sync_interval: always), for giving bench --cluster: the shape of
// deploy/nats, on loopback.
type Cluster struct {
	servers []*server.Server
}

// URL is the cluster's client URL, every node's.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// clusterNodes is how many nodes a Cluster has.
const clusterNodes = 3

// StartCluster starts a Cluster storing under dir and returns once it can
// place a stream with a replica on every node.
func StartCluster(ctx context.Context, dir string) (*Cluster, error) {
	ports, err := freePorts(2 * clusterNodes)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for i := range clusterNodes {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", ports[i])})
	}
	c := &Cluster{}
	for i := range clusterNodes {
		o := &server.Options{
			ServerName: fmt.Sprintf("bench-nats-%d", i+1), Host: "127.0.0.1", Port: ports[clusterNodes+i],
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)), SyncAlways: true,
			MaxPayload: 8 << 20, NoLog: true, NoSigs: true, Routes: routes,
		}
		o.Cluster.Name, o.Cluster.Host, o.Cluster.Port = "bench", "127.0.0.1", ports[i]
		s, err := server.NewServer(o)
		if err != nil {
			c.Close()
			return nil, err
		}
		go s.Start()
		c.servers = append(c.servers, s)
		if !s.ReadyForConnections(30 * time.Second) {
			c.Close()
			return nil, fmt.Errorf("cluster node %d not ready", i+1)
		}
	}
	if err := c.waitPlacement(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// waitPlacement waits until a stream with a replica on every node can be
// made: a leader is not enough, every peer must be known and online.
func (c *Cluster) waitPlacement(ctx context.Context) error {
	nc, err := nats.Connect(c.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.CreateStream(tctx, jetstream.StreamConfig{Name: "PLACEMENT_PROBE", Subjects: []string{"probe.>"}, Replicas: clusterNodes})
		if err == nil {
			err = js.DeleteStream(tctx, "PLACEMENT_PROBE")
		}
		tcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("the cluster placed no 3-replica stream"), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
