package e2e

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// fleet is "giving serve" instances on the deploy example's 3-node cluster
// behind one public address: a reverse proxy spreading requests over the
// instances running, as a load balancer would, so a donor session's url and
// the simulators' edge are that address.
type fleet struct {
	cluster *eventlogtest.Cluster
	// cli is what every command on the cluster is given.
	cli     []string
	live    liveTargets
	lb      *httptest.Server
	dirs    map[string]string
	addrs   map[string]string
	servers map[string]*server
	// serve is what each instance is given besides.
	serve []string
}

// startFleet starts the cluster and one instance under each name.
func startFleet(t *testing.T, masterKey string, serve []string, names ...string) *fleet {
	t.Helper()
	f := &fleet{cluster: eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats")),
		dirs: map[string]string{}, addrs: map[string]string{}, servers: map[string]*server{}, serve: serve}
	f.cli = []string{"--nats-url", f.cluster.URL(), "--replicas", "3", "--master-key", masterKey}
	f.lb = httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		u, _ := url.Parse("http://127.0.0.1:1") // none up: refused, a 502
		if targets := f.live.list(); len(targets) > 0 {
			u, _ = url.Parse(targets[rand.N(len(targets))])
		}
		pr.SetURL(u)
	}})
	t.Cleanup(f.lb.Close)
	for _, name := range names {
		f.dirs[name], f.addrs[name] = t.TempDir(), freeAddr(t)
		f.start(t, name)
	}
	return f
}

// start runs the instance name (again, after a kill) on its directory and
// address.
func (f *fleet) start(t *testing.T, name string) {
	t.Helper()
	args := append([]string{"--data", f.dirs[name], "--addr", f.addrs[name], "--public-url", f.lb.URL,
		"--rate-limit", "100000", "--rate-burst", "100000"}, f.serve...)
	f.servers[name] = launchServe(t, nil, append(args, f.cli...)...)
	f.live.set(name, f.url(name))
}

// kill stops the instance name at once and takes it out of the balancer.
func (f *fleet) kill(name string) {
	f.live.set(name, "")
	f.servers[name].kill()
}

// url is the instance's own address.
func (f *fleet) url(name string) string { return "http://" + f.addrs[name] }

// partners creates n partners, each with a church of its own, once every
// instance knows them.
func (f *fleet) partners(t *testing.T, n int, name, origin string) []loadPartner {
	t.Helper()
	out := make([]loadPartner, n)
	for i := range out {
		p := decodeCLI(t, runCLI(t, nil, append([]string{"partners", "create", "--name", name, "--redirect-origin", origin,
			"--json", "--data", t.TempDir()}, f.cli...)...))
		for instance := range f.addrs {
			waitStatus(t, f.url(instance), p.APIKey, http.StatusOK)
		}
		var first string
		for instance := range f.addrs {
			first = instance
			break
		}
		c := &apitest.Client{TB: t, Base: f.url(first), Key: p.APIKey}
		out[i] = loadPartner{ID: p.PartnerID, APIKey: p.APIKey, Origin: origin, Church: importChurch(t, c, name+" Church")}
	}
	return out
}

// ledger opens the cluster's ledger, to count what a load left in it.
func (f *fleet) ledger(t *testing.T) *eventlog.Ledger {
	t.Helper()
	l, err := eventlog.Open(context.Background(), eventlog.Config{Env: domain.Sandbox, NATSURL: f.cluster.URL(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
