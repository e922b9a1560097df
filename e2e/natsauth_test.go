package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A running instance's embedded NATS takes only clients with the token from
// its data directory; the operator CLI finds it there.
func TestEmbeddedNATSListenerNeedsToken(t *testing.T) {
	ts := startStack(t, withNATSListen("127.0.0.1:0"))
	u, err := url.Parse(ts.ledger.ClientURL())
	if err != nil || u.User == nil {
		t.Fatalf("client url: %v", err)
	}
	if nc, err := nats.Connect("nats://" + u.Host); err == nil {
		nc.Close()
		t.Fatal("a client without the token connected to the embedded NATS")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("without the token: %v", err)
	}
	_, pid := ts.partner(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"keys", "issue", "--partner", pid, "--json", "--data", ts.Dir, "--nats-listen", u.Host}, &out, &errOut); err != nil {
		t.Fatalf("keys issue online: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"api_key":"sk_test_`) {
		t.Fatalf("keys issue online: %s", out.String())
	}
	// Another data directory holds another token: the instance refuses it
	// and the CLI says why.
	err = run(context.Background(), []string{"keys", "issue", "--partner", pid, "--data", t.TempDir(), "--nats-listen", u.Host}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "running instance at nats://"+u.Host) || !strings.Contains(err.Error(), "does it serve --data") {
		t.Fatalf("keys issue with the wrong data directory: %v", err)
	}
}

// startPasswordNATS runs a nats-server with JetStream that wants a user and
// password, as the deployed cluster does, and returns its host:port.
func startPasswordNATS(t *testing.T, user, password string) string {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		JetStream: true, StoreDir: t.TempDir(), Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true,
		Username: user, Password: password,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	u, _ := url.Parse(srv.ClientURL())
	return u.Host
}

// The NATS password shows nowhere: not in what the CLI and serve print, not
// in their logs, not in their errors.
func TestNATSPasswordNeverShown(t *testing.T) {
	const secret = "s3cret-Pa55w0rd"
	host := startPasswordNATS(t, "giving", secret)
	good := "nats://giving:" + secret + "@" + host
	shown := "nats://giving:xxxxx@" + host

	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"partners", "create", "--name", "Redacted", "--nats-url", good, "--data", t.TempDir()}, &out, &errOut); err != nil {
		t.Fatalf("partners create on the cluster: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "(via cluster "+shown+")") {
		t.Fatalf("the CLI does not name the cluster it used: %q", errOut.String())
	}
	if strings.Contains(out.String()+errOut.String(), secret) {
		t.Fatalf("the CLI printed the NATS password:\n%s\n%s", out.String(), errOut.String())
	}

	closed := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	for name, addr := range map[string]string{
		"refused password":   "nats://giving:wrong-" + secret + "@" + host,
		"unreachable server": "nats://giving:" + secret + "@" + closed,
	} {
		out.Reset()
		errOut.Reset()
		err := run(context.Background(), []string{"partners", "create", "--name", "Redacted", "--nats-url", addr, "--data", t.TempDir()}, &out, &errOut)
		if err == nil {
			t.Fatalf("%s: partners create succeeded", name)
		}
		if !strings.Contains(err.Error(), "nats://giving:xxxxx@") || strings.Contains(err.Error()+out.String()+errOut.String(), secret) {
			t.Fatalf("%s: the error must name the server without its password: %v\n%s", name, err, errOut.String())
		}
	}

	// serve on the cluster: no "embedded NATS" line, no password.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sout, serr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--data", t.TempDir(), "--addr", "127.0.0.1:0", "--nats-url", good, "--log-level", "debug"}, sout, serr)
	}()
	eventlogtest.WaitFor(t, 30*time.Second, "serve prints its address", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, serr.String())
		default:
		}
		return strings.Contains(sout.String(), "stack listening on")
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, serr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(sout.String(), "embedded NATS") {
		t.Fatalf("serve on a cluster claims an embedded NATS:\n%s", sout.String())
	}
	if strings.Contains(sout.String()+serr.String(), secret) {
		t.Fatalf("serve printed the NATS password:\n%s\n%s", sout.String(), serr.String())
	}
}
