package eventlogtest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ServerOption adjusts a server that StartServer runs.
type ServerOption struct{ set func(*server.Options) }

// WithPassword makes the server take only clients presenting user and
// password, as the deployed cluster does.
func WithPassword(user, password string) ServerOption {
	return ServerOption{set: func(o *server.Options) { o.Username, o.Password = user, password }}
}

// StartServer runs a nats-server with JetStream of its own on a random
// loopback port, standing in for a cluster that several instances share, and
// stops it when the test ends. Like a cluster, which relies on replication,
// it does not fsync each write, so tests can build large ledgers quickly. It
// returns the client URL, without credentials.
func StartServer(tb testing.TB, opts ...ServerOption) string {
	tb.Helper()
	o := &server.Options{
		JetStream: true, StoreDir: tb.TempDir(), Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
	}
	for _, opt := range opts {
		opt.set(o)
	}
	return run(tb, o, 10*time.Second).ClientURL()
}

// run starts a configured server, waits until it takes clients and stops it
// when the test ends.
func run(tb testing.TB, o *server.Options, ready time.Duration) *server.Server {
	tb.Helper()
	srv, err := server.NewServer(o)
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Start()
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(ready) {
		tb.Fatalf("nats-server %s not ready after %s", o.ServerName, ready)
	}
	return srv
}

// ErrAuthorization is what Connect reports when the server refuses the
// client's credentials (or their absence).
var ErrAuthorization = nats.ErrAuthorization

// Connect connects a plain NATS client to url, with the credentials url
// carries, and closes it again: for tests of whom a server lets in.
func Connect(url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}

// connectJS connects to the server(s) at url for a test's direct look at
// JetStream; the returned function closes the connection.
func connectJS(tb testing.TB, url string) (jetstream.JetStream, func()) {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		tb.Fatal(err)
	}
	return js, nc.Close
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}
