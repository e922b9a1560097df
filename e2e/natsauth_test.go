package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A running instance's embedded NATS takes only clients with the token from
// its data directory; the operator CLI finds it there.
func TestEmbeddedNATSListenerNeedsToken(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withNATSListen("127.0.0.1:0"))
	u, err := url.Parse(ts.Ledger.ClientURL())
	if err != nil || u.User == nil {
		t.Fatalf("client url: %v", err)
	}
	if err := eventlogtest.Connect("nats://" + u.Host); err == nil {
		t.Fatal("a client without the token connected to the embedded NATS")
	} else if !errors.Is(err, eventlogtest.ErrAuthorization) {
		t.Fatalf("without the token: %v", err)
	}
	_, pid := ts.partner(t)
	r := runCLI(t, nil, "keys", "issue", "--partner", pid, "--json", "--data", ts.Dir)
	if r.Code != 0 {
		t.Fatalf("keys issue online: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, `"api_key":"sk_test_`) || !strings.Contains(r.Stderr, "via running instance at nats://"+u.Host) {
		t.Fatalf("keys issue online: %s\n%s", r.Stdout, r.Stderr)
	}
}

// The NATS password shows nowhere: not in what the CLI and serve print, not
// in their logs, not in their errors.
func TestNATSPasswordNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pa55w0rd"
	u, err := url.Parse(eventlogtest.StartServer(t, eventlogtest.WithPassword("giving", secret)))
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	good := "nats://giving:" + secret + "@" + host
	shown := "nats://giving:xxxxx@" + host

	r := runCLI(t, nil, "partners", "create", "--name", "Redacted", "--nats-url", good, "--data", t.TempDir())
	if r.Code != 0 {
		t.Fatalf("partners create on the cluster: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "(via cluster "+shown+")") {
		t.Fatalf("the CLI does not name the cluster it used: %q", r.Stderr)
	}
	if strings.Contains(r.Stdout+r.Stderr, secret) {
		t.Fatalf("the CLI printed the NATS password:\n%s\n%s", r.Stdout, r.Stderr)
	}

	closed := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	for name, addr := range map[string]string{
		"refused password":   "nats://giving:wrong-" + secret + "@" + host,
		"unreachable server": "nats://giving:" + secret + "@" + closed,
	} {
		r := runCLI(t, nil, "partners", "create", "--name", "Redacted", "--nats-url", addr, "--data", t.TempDir())
		if r.Code == 0 {
			t.Fatalf("%s: partners create succeeded", name)
		}
		// The binary prints its error on stderr.
		if !strings.Contains(r.Stderr, "nats://giving:xxxxx@") || strings.Contains(r.Stdout+r.Stderr, secret) {
			t.Fatalf("%s: the error must name the server without its password:\n%s", name, r.Stderr)
		}
	}

	// serve on the cluster: no "embedded NATS" line, no password.
	srv := launchServe(t, nil, "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--nats-url", good, "--log-level", "debug")
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, srv.Stderr)
	}
	if strings.Contains(srv.Stdout.String(), "embedded NATS") {
		t.Fatalf("serve on a cluster claims an embedded NATS:\n%s", srv.Stdout)
	}
	if strings.Contains(srv.Stdout.String()+srv.Stderr.String(), secret) {
		t.Fatalf("serve printed the NATS password:\n%s\n%s", srv.Stdout, srv.Stderr)
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}
